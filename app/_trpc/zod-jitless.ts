import { z } from "zod";

// The dashboard runs under a nonce CSP without 'unsafe-eval'. zod compiles object parsers with `new
// Function` when it may, and its probe for that is reported by the browser as a CSP violation even though
// zod catches the error; jitless mode skips both. Imported first by the client provider, before any schema
// in a client component parses.
z.config({ jitless: true });
