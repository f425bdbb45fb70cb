import fs from "node:fs/promises";
import path from "node:path";
import { EGRESS_ENV } from "@/server/workspace/gateway/egress-protocol";
import { GATEWAY_ENV } from "@/server/workspace/gateway/gateway-protocol";
import { EgressProxy, type EgressGrant } from "./egress-proxy";

export type { EgressGrant } from "./egress-proxy";

/** An open grant: `env` goes into the commands that may use it; `close` ends it (the proxy stays). */
export type EgressLease = { env: Record<string, string>; close(): void };

/**
 * A machine's egress in this process: one proxy per (process, workspace), listening on a socket in a host
 * folder the machine sees (bubblewrap mounts it into each command's sandbox; Docker has it in the
 * container's bind-mounted runtime folder), started on the first grant and closed with the machine. Why
 * per process: commands are run by whichever API or worker process serves the turn, and that process holds
 * the turn's grant (policy and unsealed secrets) in memory only, so its own proxy serves them; nothing
 * about a grant is shared or stored.
 */
export class MachineEgress {
  private proxy: EgressProxy | null = null;

  constructor(
    private readonly place: {
      /** The proxy's socket on the host; its folder is created (0755) if missing. */
      hostSocketPath: string;
      /** The same socket as the machine's commands see it. */
      machineSocketPath: string;
    },
  ) {}

  get hostSocketDir(): string {
    return path.dirname(this.place.hostSocketPath);
  }

  async open(grant: EgressGrant): Promise<EgressLease> {
    if (!this.proxy) {
      await fs.mkdir(this.hostSocketDir, { recursive: true, mode: 0o755 });
      this.proxy = new EgressProxy(this.place.hostSocketPath);
    }
    await this.proxy.listen();
    const proxy = this.proxy;
    const token = proxy.add(grant);
    return { env: { [EGRESS_ENV.token]: token }, close: () => proxy.remove(token) };
  }

  /**
   * `command` behind the forwarder (`forwarder` is its argv prefix on this machine) when `env` carries an
   * open grant's token; otherwise as it was, with any stray token removed (no grant, no network).
   */
  wrap(
    command: readonly string[],
    env: Readonly<Record<string, string>> | undefined,
    forwarder: readonly string[],
  ): { command: readonly string[]; env: Record<string, string> | undefined; wrapped: boolean } {
    const token = env?.[EGRESS_ENV.token];
    if (!env || token === undefined) return { command, env: env && { ...env }, wrapped: false };
    const rest = Object.fromEntries(Object.entries(env).filter(([name]) => name !== EGRESS_ENV.token));
    if (!this.proxy?.has(token)) return { command, env: rest, wrapped: false };
    return {
      command: [...forwarder, ...command],
      env: {
        ...rest,
        [GATEWAY_ENV.role]: EGRESS_ENV.role,
        [EGRESS_ENV.socket]: this.place.machineSocketPath,
        [EGRESS_ENV.token]: token,
      },
      wrapped: true,
    };
  }

  async close(): Promise<void> {
    const proxy = this.proxy;
    this.proxy = null;
    await proxy?.close();
  }
}
