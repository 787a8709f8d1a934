"""Management: projects, credentials, service accounts (CLI and `/api/app`)."""
