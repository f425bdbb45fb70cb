import path from "node:path";
import { defineConfig } from "prisma/config";

// Offline: Prisma 7 would download its native schema engine from binaries.prisma.sh, which this
// environment cannot reach. prisma/schema-engine-wasm.mjs speaks the same JSON-RPC protocol on top
// of the Wasm schema engine (see docs/prisma-offline.md). The CLI loads this file before it looks
// for engines, so setting the variable here is enough.
process.env.PRISMA_SCHEMA_ENGINE_BINARY ??= path.join(
  import.meta.dirname,
  "prisma",
  "schema-engine-wasm.mjs",
);
process.env.CHECKPOINT_DISABLE ??= "1";

export default defineConfig({
  schema: "prisma",
  migrations: { path: "prisma/migrations" },
  datasource: { url: process.env.DATABASE_URL ?? "" },
});
