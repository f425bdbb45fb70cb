import { EGRESS_ENV } from "../egress-protocol";
import { GATEWAY_ENV } from "../gateway-protocol";

/**
 * Entry point of the gateway bundle. The same file runs two roles: the gateway itself, and (with
 * BERTH_GATEWAY_ROLE=files) its unprivileged file worker. The roles are loaded by dynamic import, which the
 * bundler turns into lazily initialised modules, so the worker never evaluates the MCP SDK it does not use
 * (it saves tens of MB of resident memory in every container).
 */
const requested = process.env[GATEWAY_ENV.role];
const role = requested === "files" || requested === EGRESS_ENV.role ? requested : "gateway";

function fail(error: unknown): never {
  console.error(
    `[gateway] ${role} failed to start: ${error instanceof Error ? error.message : String(error)}`,
  );
  process.exit(1);
}

if (role === EGRESS_ENV.role) {
  // In front of one command: the egress forwarder (egress-forwarder.ts).
  import("./egress-forwarder").then((forwarder) => forwarder.runEgressExec()).catch(fail);
} else if (role === "files") {
  import("./file-worker").then((worker) => worker.runFileWorker()).catch(fail);
} else {
  import("./gateway-process").then((gateway) => gateway.runGateway()).catch(fail);
}
