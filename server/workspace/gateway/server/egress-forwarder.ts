import { spawn } from "node:child_process";
import net from "node:net";
import { EGRESS_ENV, EGRESS_PROXY_USER } from "../egress-protocol";
import { GATEWAY_ENV } from "../gateway-protocol";

const FORWARDED_SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"] as const;

/**
 * The egress forwarder (the gateway bundle's `egress` role): runs in FRONT of one command, inside that
 * command's sandbox or container. It listens on 127.0.0.1 (an ephemeral port, so concurrent commands of one
 * container never collide) and relays every connection to the host's egress proxy through the unix socket
 * bind-mounted into the machine; then it starts the command with the proxy variables pointing at itself and
 * ends with the command's exit status.
 *
 * Why in front of each command rather than once in the gateway: a bubblewrap command runs in a network
 * namespace of its own (`--unshare-net` per sandbox), so a listener in the gateway's sandbox is not
 * reachable from it; the same forwarder serves Docker so both backends behave alike. The workspace still has
 * no network of its own: only loopback, and this relay to a proxy that decides.
 */
export function runEgressExec(): void {
  const socketPath = process.env[EGRESS_ENV.socket] ?? "";
  const token = process.env[EGRESS_ENV.token] ?? "";
  for (const name of [EGRESS_ENV.socket, EGRESS_ENV.token, GATEWAY_ENV.role]) delete process.env[name];
  const [program, ...args] = process.argv.slice(2);
  if (!program || !socketPath || !token) {
    console.error("berth egress: a command, a socket and a token are required");
    process.exit(2);
  }
  const server = net.createServer((client) => {
    const upstream = net.connect(socketPath);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", drop);
    upstream.on("error", drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.on("error", (error) => {
    console.error(`berth egress: ${error.message}`);
    process.exit(2);
  });
  server.listen(0, "127.0.0.1", () => {
    const address = server.address();
    const port = typeof address === "object" && address ? address.port : 0;
    const proxy = `http://${EGRESS_PROXY_USER}:${token}@127.0.0.1:${port}`;
    const noProxy = "localhost,127.0.0.1";
    const child = spawn(program, args, {
      stdio: "inherit",
      env: {
        ...process.env,
        HTTP_PROXY: proxy,
        HTTPS_PROXY: proxy,
        http_proxy: proxy,
        https_proxy: proxy,
        NO_PROXY: noProxy,
        no_proxy: noProxy,
      },
    });
    const forward = (signal: NodeJS.Signals) => child.kill(signal);
    for (const signal of FORWARDED_SIGNALS) process.on(signal, forward);
    child.on("error", (error) => {
      // As a shell would say it: the exec's caller maps 127 to "command not found".
      console.error(`${program}: ${error.message}`);
      process.exit((error as NodeJS.ErrnoException).code === "ENOENT" ? 127 : 126);
    });
    child.on("exit", (code, signal) => {
      server.close();
      if (signal) {
        for (const name of FORWARDED_SIGNALS) process.removeListener(name, forward);
        process.kill(process.pid, signal);
        return;
      }
      process.exit(code ?? 1);
    });
  });
}
