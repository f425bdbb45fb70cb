/**
 * An API replica for the terminal tests: the Berth root `npm start` builds
 * (scripts/berth-process.ts: createBerth, installed as the process' root, every member built up front)
 * and an HTTP server that serves the terminal WebSocket exactly as npm start's server does
 * (`serveTerminalUpgrades`). Next is left out: it serves no upgrades, and a build would cost minutes.
 * Prints `ready <port>`; SIGTERM shuts down the way npm start does (terminals, engine, connections).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { serveTerminalUpgrades } from "@/server/api/terminal-socket";
import { buildApiProcess, createBerth } from "@/server/composition/berth";
import { closeProcessBerth, installProcessBerth } from "@/server/composition/process-berth";
import { loadConfig } from "@/server/config/config";

const berth = installProcessBerth(createBerth(loadConfig()));
buildApiProcess(berth);

const server = createServer((_req, res) => res.writeHead(404).end());
serveTerminalUpgrades(berth, server);
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
process.stdout.write(`ready ${(server.address() as AddressInfo).port}\n`);

process.once("SIGTERM", () => {
  void (async () => {
    server.close();
    await closeProcessBerth();
    server.closeAllConnections();
    process.exit(0);
  })();
});
