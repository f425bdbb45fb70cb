/**
 * `npm run berth -- <group> <command> …`: the operator CLI for scripted installs (tenants and operators),
 * over the same services as the `operator.*` API. Composition root: reads DATABASE_URL, REDIS_URL (the
 * queues for workspace stops and tenant deletion) and BERTH_BASE_URL (invitation links) from the
 * environment; without DATABASE_URL, those of the `npm start` running on BERTH_DATA_DIR
 * (cli/running-berth.ts), whose recorded base URL the links use unless BERTH_BASE_URL is set here. The
 * commands and exit codes are cli/main.ts's. The process' Berth (createBerth) is built from that environment
 * once a command first needs it; this closes it, so the process ends.
 */
import { closeProcessBerth } from "@/server/composition/process-berth";
import { runBerthCli } from "./cli/main";

try {
  process.exitCode = await runBerthCli(process.argv.slice(2));
} finally {
  await closeProcessBerth().catch(() => undefined);
}
