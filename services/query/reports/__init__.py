"""One module per endpoint family: parse the request, build the SQL, shape the response."""
