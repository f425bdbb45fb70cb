#!/usr/bin/env node
// Offline stand-in for Prisma's native `schema-engine` binary (PostgreSQL only).
//
// Prisma 7's CLI spawns the binary named by PRISMA_SCHEMA_ENGINE_BINARY and talks JSON-RPC
// over stdin/stdout. The native binary is downloaded from binaries.prisma.sh, which is not
// reachable here, so this script implements the same protocol on top of the Wasm build of
// the schema engine (npm: @prisma/schema-engine-wasm) driven by @prisma/adapter-pg.
//
// Usage: PRISMA_SCHEMA_ENGINE_BINARY=prisma/schema-engine-wasm.mjs npx prisma migrate dev
// (the file must be executable: chmod +x).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import readline from "node:readline";

const require = createRequire(import.meta.url);
const pg = require("pg");
const { PrismaPg } = require("@prisma/adapter-pg");
const { parse: parseUrl } = createRequire(require.resolve("pg"))("pg-connection-string");
// the driver-adapter-utils copy that @prisma/adapter-pg itself uses
const { bindMigrationAwareSqlAdapterFactory } = createRequire(require.resolve("@prisma/adapter-pg"))(
  "@prisma/driver-adapter-utils",
);

// The Wasm engine reports Rust panics through this global (see schema-engine-wasm's panic hook).
globalThis.PRISMA_WASM_PANIC_REGISTRY ??= {
  message: "",
  set_message(m) {
    this.message = `RuntimeError: ${m}`;
  },
};

// ---------------------------------------------------------------- arguments
const argv = process.argv.slice(2);
const datamodelPaths = [];
let datasource = {};
let cliCommand = null;
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === "--datamodels") datamodelPaths.push(argv[++i]);
  else if (a === "--datasource") datasource = JSON.parse(argv[++i]);
  else if (a === "--enabled-preview-features" || a === "--extension-types") i++;
  else if (a === "cli") cliCommand = argv[++i];
  else if (a === "--version" || a === "-V") {
    const pkg = path.join(
      path.dirname(require.resolve("@prisma/schema-engine-wasm/schema_engine_bg")),
      "package.json",
    );
    console.log(`schema-engine-wasm-shim ${JSON.parse(readFileSync(pkg, "utf8")).version}`);
    process.exit(0);
  }
}

const quoteIdent = (name) => `"${name.replaceAll('"', '""')}"`;
const log = (level, message, extra = {}) =>
  process.stderr.write(
    JSON.stringify({ level, fields: { message, ...extra }, target: "schema_engine::logger" }) + "\n",
  );

// ------------------------------------------------------- pg driver adapter
// OIDs @prisma/adapter-pg can decode; the schema engine also reads catalog types
// (name, "char", oidvector, ...) that the adapter rejects (prisma/orm#27403): send those as text.
const SUPPORTED = new Set([
  16, 17, 20, 21, 23, 25, 26, 114, 142, 650, 700, 701, 790, 869, 1042, 1043, 1082, 1083, 1114, 1184, 1266,
  1560, 1562, 1700, 2950, 3802, 143, 199, 651, 791, 1000, 1001, 1002, 1005, 1007, 1009, 1014, 1015, 1016,
  1021, 1022, 1028, 1041, 1115, 1182, 1183, 1185, 1231, 1561, 1563, 2951, 3807,
]);
// The single-byte catalog type "char" (OID 18; pg_constraint.contype, pg_class.relkind, ...).
// adapter-pg cannot decode it; sending it as text is not enough either, because the schema
// describer reads some of these columns as a character (`get_char`) and panics on a text value
// (seen with PostgreSQL 18, whose NOT NULL constraints appear in pg_constraint). Decode it as text
// and report the column as ColumnType Character, which is what the native engine produces.
const CHAR_OID = 18;
const CHARACTER_COLUMN_TYPE = 6; // ColumnTypeEnum.Character in @prisma/driver-adapter-utils
const charColumns = Symbol("charColumns");
let patched = false;
function patchAdapter(adapter) {
  if (patched) return;
  const adapterProto = Object.getPrototypeOf(adapter); // PrismaPgAdapter
  const queryableProto = Object.getPrototypeOf(adapterProto); // PgQueryable (also transactions)
  const performIO = queryableProto.performIO;
  queryableProto.performIO = async function (query) {
    const result = await performIO.call(this, query);
    result?.fields?.forEach((field, i) => {
      if (field.dataTypeID === CHAR_OID) {
        (result.rows[charColumns] ??= []).push(i);
        field.dataTypeID = 25;
        return;
      }
      if (field.dataTypeID < 16384 && !SUPPORTED.has(field.dataTypeID)) {
        const row = result.rows.find((r) => r[i] != null);
        field.dataTypeID = Array.isArray(row?.[i]) ? 1009 : 25;
      }
    });
    return result;
  };
  const queryRaw = queryableProto.queryRaw;
  queryableProto.queryRaw = async function (query) {
    const result = await queryRaw.call(this, query);
    for (const i of result.rows?.[charColumns] ?? []) result.columnTypes[i] = CHARACTER_COLUMN_TYPE;
    return result;
  };
  // adapter-pg splits scripts on ";" (breaks $$ bodies / string literals) and runs the pieces
  // one by one; send the whole script in one simple-protocol query like the native engine.
  adapterProto.executeScript = async function (script) {
    try {
      await this.client.query(script);
    } catch (error) {
      this.onError(error);
    }
  };
  patched = true;
}

// connectionString would override `database` (pg merges it last), so always pass parsed fields.
// `?schema=` is Prisma's own URL parameter: hand it to the adapter instead of pg.
const pgConfig = (url) => {
  const { schema, connection_limit, pool_timeout, ...rest } = parseUrl(url);
  if (schema) {
    // like the native engine: unqualified names in migrations resolve to ?schema=
    const searchPath = `-c search_path=${quoteIdent(schema)}`;
    rest.options = rest.options ? `${rest.options} ${searchPath}` : searchPath;
  }
  return rest;
};
const pgSchema = (url) => parseUrl(url).schema ?? undefined;

function adapterFactory(url) {
  const config = pgConfig(url);
  const schema = pgSchema(url);
  const factory = new PrismaPg(config, schema ? { schema } : undefined);
  const connect = factory.connect.bind(factory);
  factory.connect = async () => {
    const adapter = await connect();
    patchAdapter(adapter);
    return adapter;
  };
  // Fresh throw-away shadow database per command. (adapter-pg's own connectToShadowDb drops the
  // database while its pool is still connected, which fails.)
  factory.connectToShadowDb = async () => {
    const admin = await factory.connect();
    const name = `prisma_migrate_shadow_db_${globalThis.crypto.randomUUID()}`;
    await admin.executeScript(`CREATE DATABASE ${quoteIdent(name)}`);
    const shadow = await new PrismaPg(
      { ...config, database: name },
      schema ? { schema } : undefined,
    ).connect();
    patchAdapter(shadow);
    if (schema) await shadow.executeScript(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
    const dispose = shadow.dispose.bind(shadow);
    shadow.dispose = async () => {
      await dispose();
      await admin.executeScript(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`);
      await admin.dispose();
    };
    return shadow;
  };
  return factory;
}

// ------------------------------------------------------ `cli` sub-commands
async function pgConnect(cfg) {
  const client = new pg.Client(cfg);
  await client.connect();
  return client;
}
async function ensureDatabase(config) {
  try {
    await (await pgConnect(config)).end();
  } catch (e) {
    if (e.code !== "3D000") throw e; // only "database does not exist"
    const admin = await pgConnect({ ...config, database: "postgres" });
    await admin.query(`CREATE DATABASE ${quoteIdent(config.database)}`);
    await admin.end();
  }
}

async function runCli(command) {
  // The CLI ignores the first stderr line (the native engine's start-up log line).
  log("INFO", `schema-engine-wasm shim: cli ${command}`);
  const config = pgConfig(datasource.url);
  try {
    if (command === "can-connect-to-database") {
      await (await pgConnect(config)).end();
    } else if (command === "create-database") {
      await ensureDatabase(config);
    } else if (command === "drop-database") {
      const admin = await pgConnect({ ...config, database: "postgres" });
      await admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(config.database)}`);
      await admin.end();
    } else {
      throw new Error(`unsupported cli command ${command}`);
    }
    process.exit(0);
  } catch (e) {
    const code = e.code === "3D000" ? "P1003" : "P1001";
    log("ERROR", e.message, { error_code: code });
    process.exit(1);
  }
}

// ------------------------------------------------------------- JSON-RPC
// (the package's "exports" hide package.json and its main entry needs Node's Wasm-ESM flag)
const pkgDir = path.dirname(require.resolve("@prisma/schema-engine-wasm/schema_engine_bg"));
let glue;
let boundFactory;
async function newEngine() {
  if (!glue) {
    glue = await import(path.join(pkgDir, "schema_engine_bg.js"));
    const module = new WebAssembly.Module(readFileSync(path.join(pkgDir, "schema_engine_bg.wasm")));
    const instance = new WebAssembly.Instance(module, { "./schema_engine_bg.js": glue });
    glue.__wbg_set_wasm(instance.exports);
    instance.exports.__wbindgen_start();
  }
  const datamodels = datamodelPaths.map((p) => [p, readFileSync(p, "utf8")]);
  // The engine expects the error-capturing wrapper (Result objects + error registry),
  // exactly like Prisma 6's `engine: "js"` mode did.
  boundFactory = bindMigrationAwareSqlAdapterFactory(adapterFactory(datasource.url));
  return glue.SchemaEngine.new(
    { datamodels: datamodels.length ? datamodels : undefined },
    (line) => process.stderr.write(line.endsWith("\n") ? line : line + "\n"),
    boundFactory,
  );
}

let nextOwnId = 1_000_000;
// "External error id#N": a JS exception thrown inside the driver adapter (e.g. a pg auth error),
// parked in the adapter's error registry. Put the real message back.
function explain(message) {
  return message.replace(/External error id#(\d+)/g, (m, id) => {
    const rec = boundFactory?.errorRegistry?.consumeError?.(Number(id));
    const err = rec?.error;
    return err ? `${m}: ${err.message ?? JSON.stringify(err)}` : m;
  });
}
const send = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");

let enginePromise;
// The request being handled (requests run one at a time), so a panic that escapes the awaited
// promise chain can still be answered (see the uncaughtException handler below).
let inFlightId = null;
async function handle(req) {
  const { id, method, params } = req;
  inFlightId = id;
  try {
    // one engine per process, like the native binary (it keeps a per-process migration cache)
    const engine = await (enginePromise ??= newEngine());
    let result;
    switch (method) {
      case "getDatabaseVersion":
        result = await engine.version(params ?? null);
        break;
      case "diff": {
        const { stdout, ...rest } = await engine.diff(params);
        if (stdout)
          send({
            id: nextOwnId++,
            jsonrpc: "2.0",
            method: "print",
            params: { content: stdout.replace(/\n$/, "") },
          });
        result = rest;
        break;
      }
      case "dbExecute":
        await engine.dbExecute(params);
        result = null;
        break;
      case "evaluateDataLoss":
        try {
          result = await engine.evaluateDataLoss(params);
        } catch (e) {
          // The Wasm engine's evaluateDataLoss gets no shadow-database factory: it only works when
          // the schema of exactly these migrations is already in the engine's cache. After
          // `migrate dev` applied pending migrations it is not, and it fails with
          // "PostgreSQL shadow DB must be provided through an external factory". Fill the cache
          // with devDiagnostic (which does get the factory) and retry once.
          if (!/shadow DB must be provided/.test(e?.message ?? "")) throw e;
          await engine.devDiagnostic({ migrationsList: params.migrationsList, filters: params.filters });
          result = await engine.evaluateDataLoss(params);
        }
        break;
      case "reset":
        await engine.reset(params);
        result = null;
        break;
      case "createDatabase": {
        const config = pgConfig(params?.datasource?.url ?? datasource.url);
        await ensureDatabase(config);
        result = { databaseName: config.database };
        break;
      }
      default:
        if (typeof engine[method] !== "function")
          throw new Error(`Method ${method} is not supported by the Wasm schema engine shim`);
        result = (await engine[method](params)) ?? null;
    }
    send({ id, jsonrpc: "2.0", result });
  } catch (e) {
    sendError(id, e);
  } finally {
    inFlightId = null;
  }
}

function sendError(id, e) {
  const isPanic = e?.name === "RuntimeError";
  const message = isPanic
    ? globalThis.PRISMA_WASM_PANIC_REGISTRY.message || e.message
    : (e?.message ?? String(e));
  const data = { is_panic: isPanic, message: explain(message), backtrace: e?.stack ?? null };
  if (e && typeof e === "object" && "code" in e && e.code) {
    data.error_code = e.code;
    data.meta = e.meta ?? null;
  }
  if (isPanic) data.error = { message: data.message };
  const top = isPanic ? data.message : "An error happened. Check the data field for details.";
  send({ id, jsonrpc: "2.0", error: { code: 4466, message: top, data } });
}

// A Rust panic inside the Wasm engine can surface from a callback the engine schedules itself,
// outside any awaited promise. Unhandled, Node would print a stack trace and exit, and the CLI
// would then report a confusing error (or even exit 0 from `migrate diff --exit-code`). Answer
// the pending request with a proper panic error instead, then exit non-zero.
function onFatal(e) {
  if (inFlightId !== null) sendError(inFlightId, e);
  else
    log(
      "ERROR",
      `schema-engine-wasm shim: ${globalThis.PRISMA_WASM_PANIC_REGISTRY.message || (e?.stack ?? String(e))}`,
    );
  process.stdout.write("", () => process.exit(1));
}
process.on("uncaughtException", onFatal);
process.on("unhandledRejection", onFatal);

async function main() {
  if (cliCommand) return runCli(cliCommand);
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  let queue = Promise.resolve();
  rl.on("line", (line) => {
    if (!line.trim()) return;
    const msg = JSON.parse(line);
    if (msg.method === undefined) return; // response to our own `print` request
    queue = queue.then(() => handle(msg));
  });
  rl.on("close", async () => {
    await queue;
    process.exit(0);
  });
}

main().catch((e) => {
  log("ERROR", e?.stack ?? String(e));
  process.exit(1);
});
