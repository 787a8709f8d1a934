'use strict';
/*
 * Runs mixpanel-import jobs one after another and prints the library's results as one JSON line.
 *
 *   node --require ./redirect.cjs run.cjs JOBS.json
 *
 * JOBS.json: [{"creds": {...}, "data": "<path of an NDJSON or JSON file>", "opts": {...}}, ...],
 * passed unchanged to `require('mixpanel-import')(creds, data, opts)`. Output: the list of the
 * summaries the library returned (its `memory`/`memoryHuman` samples left out).
 */

const fs = require('fs');
const mpImport = require('mixpanel-import');

async function main() {
	const jobs = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
	const results = [];
	for (const job of jobs) {
		const summary = await mpImport(job.creds, job.data, job.opts);
		const { memory, memoryHuman, ...rest } = summary;
		results.push(rest);
	}
	process.stdout.write(JSON.stringify(results) + '\n');
}

main().then(
	() => process.exit(0), // the library's keep-alive pools would hold the process open
	(error) => {
		console.error(error && error.stack ? error.stack : error);
		process.exit(1);
	},
);
