/**
 * An API replica for the terminal tests: the process-wide composition `npm start` builds
 * (scripts/berth-process.ts: database, Redis, queues, engine, workspace services, auth, registry sealed)
 * and an HTTP server that serves the terminal WebSocket exactly as npm start's server does
 * (`serveTerminalUpgrades`). Next is left out: it serves no upgrades, and a build would cost minutes.
 * Prints `ready <port>`; SIGTERM shuts down the way npm start does (terminals, engine, connections).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { getApiComposition } from "@/server/api/composition";
import { serveTerminalUpgrades } from "@/server/api/terminal-socket";
import {
  closeAgentServices,
  closeEngine,
  getEngine,
  getWorkspaceServices,
} from "@/server/composition/services";
import { disconnectDb, getDb } from "@/server/db";
import { closeSharedQueues, getQueues } from "@/server/queue/queues";
import { closeSharedRedis, getRedis } from "@/server/redis";
import { sealProcessRegistry } from "@/server/shared/process-registry";

getDb();
getRedis();
getQueues();
getEngine();
getWorkspaceServices();
getApiComposition();
sealProcessRegistry("test/integration/multiprocess/terminal-api-process.ts");

const server = createServer((_req, res) => res.writeHead(404).end());
serveTerminalUpgrades(server);
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
process.stdout.write(`ready ${(server.address() as AddressInfo).port}\n`);

process.once("SIGTERM", () => {
  void (async () => {
    server.close();
    await closeAgentServices();
    await closeEngine();
    await Promise.all([closeSharedQueues(), closeSharedRedis(), disconnectDb()]);
    server.closeAllConnections();
    process.exit(0);
  })();
});
