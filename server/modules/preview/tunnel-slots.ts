import type { Duplex } from "node:stream";
import { AppError } from "@/server/shared/errors";

/**
 * Open preview tunnels per workspace in this process, bounded: each one holds a connection into the machine
 * (on bubblewrap a relay process of its own), and a page that opens hundreds of subrequests or sockets must
 * not turn one workspace's preview into a fork storm on the host. Over the bound a request is refused with
 * TOO_MANY_REQUESTS (a browser retries a failed subresource on reload; nothing is queued behind it).
 */
export class TunnelSlots {
  private readonly open = new Map<string, number>();

  constructor(private readonly perWorkspace: number) {}

  /** Takes a slot for `workspaceId` while `opening` runs and the tunnel it returns stays open. */
  async hold(workspaceId: string, opening: () => Promise<Duplex>): Promise<Duplex> {
    const count = this.open.get(workspaceId) ?? 0;
    if (count >= this.perWorkspace) {
      throw new AppError("TOO_MANY_REQUESTS", `${count} preview connections open to ${workspaceId}`, {
        userMessage: `Too many preview connections to this workspace are open (at most ${this.perWorkspace}). Try again shortly.`,
        details: { reason: "preview_connections", limit: this.perWorkspace },
      });
    }
    this.open.set(workspaceId, count + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      const left = (this.open.get(workspaceId) ?? 1) - 1;
      if (left <= 0) this.open.delete(workspaceId);
      else this.open.set(workspaceId, left);
    };
    try {
      const tunnel = await opening();
      if (tunnel.destroyed) release();
      else tunnel.once("close", release);
      return tunnel;
    } catch (error) {
      release();
      throw error;
    }
  }

  /** Tunnels open to `workspaceId` now. */
  count(workspaceId: string): number {
    return this.open.get(workspaceId) ?? 0;
  }
}
