import { expect } from "vitest";
import type { ContractContext } from "../backend-contract";

// Far from anything a test machine listens on; nothing in a fresh machine does.
const CLOSED_PORT = 59_321;

/**
 * previews where `capabilities.previews`: the machine has `openTunnel`, and a tunnel to a port nothing listens
 * on is refused as BAD_GATEWAY `port_not_listening` (what the preview relay turns into a 502 with that text).
 * A working tunnel needs an app running in the machine: test/integration/preview (local) and
 * test/drivers/docker/docker-preview-tunnel.test.ts prove those.
 */
export function registerPreviewCases(context: ContractContext): void {
  context.it(
    "previews: openTunnel exists where capabilities.previews says so; a closed port is a typed 502",
    async () => {
      if (!context.driver.capabilities.previews) return;
      expect(typeof context.backend.openTunnel).toBe("function");
      await expect(context.backend.openTunnel!(CLOSED_PORT)).rejects.toMatchObject({
        code: "BAD_GATEWAY",
        details: expect.objectContaining({ reason: "port_not_listening" }) as unknown,
      });
    },
  );
}
