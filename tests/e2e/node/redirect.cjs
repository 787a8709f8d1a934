'use strict';
/*
 * Preload (`node --require ./redirect.cjs run.cjs ...`): sends mixpanel-import's requests to the
 * Footfall server under test instead of Mixpanel, without changing the library.
 *
 * mixpanel-import (3.1.43, default transport "undici") builds three undici Pools at module load for
 * the fixed origins https://api.mixpanel.com, https://api-eu.mixpanel.com and
 * https://api-in.mixpanel.com (components/importers.js) and only ever calls `pool.request(...)`
 * with the path (`/import`, `/engage`, `/groups` plus its query string). Before the library loads,
 * this file replaces the `Pool` export of the undici copy the library resolves with a subclass
 * whose constructor swaps those origins for REDIRECT_TARGET (e.g. http://127.0.0.1:8123). Every
 * other part of the request (path, query, headers, body, retries) is the library's own. In
 * production the same is done with DNS and a TLS reverse proxy in front of Footfall.
 *
 * REDIRECT_RECORD (optional): a file to which every request is appended as one JSON line
 * ({origin, method, path, headers, body, sent_ms, done_ms, status}) - the body as the library sent
 * it, gunzipped when it sent `Content-Encoding: gzip` - so the test can compute the reference
 * state from exactly what went over the wire. Retries are recorded as separate requests.
 *
 * A safety net: any host-name lookup fails (the redirected origin is an IP literal), so a request
 * that escaped the redirect can never reach a real Mixpanel endpoint.
 */

const dns = require('dns');
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

const target = process.env.REDIRECT_TARGET;
if (!target || !/^http:\/\/127\.0\.0\.1:\d+$/.test(target)) {
	throw new Error(`redirect.cjs: REDIRECT_TARGET must be http://127.0.0.1:<port>, got ${target}`);
}
const recordFile = process.env.REDIRECT_RECORD || '';

const MIXPANEL_ORIGINS = new Set(['https://api.mixpanel.com', 'https://api-eu.mixpanel.com', 'https://api-in.mixpanel.com']);

// the undici module instance mixpanel-import itself requires (it may carry its own nested copy)
const libraryDir = path.dirname(require.resolve('mixpanel-import'));
const undici = require(require.resolve('undici', { paths: [libraryDir] }));
const OriginalPool = undici.Pool;

class RedirectedPool extends OriginalPool {
	constructor(origin, options) {
		const asked = String(origin).replace(/\/+$/, '');
		super(MIXPANEL_ORIGINS.has(asked) ? target : origin, options);
		this.askedOrigin = asked;
	}
}

function bodyText(body, headers) {
	if (body === undefined || body === null) return '';
	const encoding = headers && (headers['Content-Encoding'] || headers['content-encoding']);
	const bytes = Buffer.isBuffer(body) || body instanceof Uint8Array ? Buffer.from(body) : Buffer.from(String(body));
	return (encoding === 'gzip' ? zlib.gunzipSync(bytes) : bytes).toString('utf8');
}

if (recordFile) {
	RedirectedPool.prototype.request = async function request(options, ...rest) {
		const entry = {
			origin: this.askedOrigin,
			method: options.method,
			path: options.path,
			headers: options.headers,
			body: bodyText(options.body, options.headers),
			sent_ms: Date.now(),
		};
		let response;
		try {
			response = await OriginalPool.prototype.request.call(this, options, ...rest);
			entry.status = response.statusCode;
			return response;
		} catch (error) {
			entry.error = String(error && error.code ? error.code : error);
			throw error;
		} finally {
			entry.done_ms = Date.now();
			fs.appendFileSync(recordFile, JSON.stringify(entry) + '\n');
		}
	};
}

undici.Pool = RedirectedPool;

const realLookup = dns.lookup;
dns.lookup = function lookup(hostname, ...rest) {
	if (hostname === 'localhost') return realLookup.call(dns, hostname, ...rest);
	const callback = rest[rest.length - 1];
	const error = Object.assign(new Error(`redirect.cjs: refusing to resolve ${hostname}`), { code: 'EREDIRECTONLY' });
	process.nextTick(callback, error);
	return undefined;
};
