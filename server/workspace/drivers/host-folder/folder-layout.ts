import { createHash } from "node:crypto";
import path from "node:path";
import type { WorkspaceSpec } from "@/server/workspace/drivers/driver";

/**
 * The host-folder layout every driver whose workspaces are host folders shares (bubblewrap, host-unconfined,
 * and Docker's bind-mounted workdirs): `<basedir>/<tenant>/<user>/<workspaceId>`, each id one safe segment,
 * so switching between the host-folder drivers keeps the data.
 */
export function workspaceFolder(
  basedir: string,
  owner: Pick<WorkspaceSpec, "tenantId" | "userId" | "workspaceId">,
): string {
  // basedir is a runtime setting, not a file of the build: without turbopackIgnore `next build` traces
  // the whole project into the server output.
  return path.join(
    /* turbopackIgnore: true */ basedir,
    safePathSegment(owner.tenantId),
    safePathSegment(owner.userId),
    safePathSegment(owner.workspaceId),
  );
}

const PLAIN_SEGMENT = /^[A-Za-z0-9_-]+$/;
const MAX_SEGMENT_LENGTH = 120;

/**
 * Maps any id to one safe, collision-free directory name: plain ids stay as they are; anything else is
 * percent-encoded byte by byte (`%2F`, `%2E`, ...), which can never equal a plain id because plain ids contain
 * no `%`. The empty id is `%`; overlong results become `%h<sha256>` (`h` is not a hex digit, so no clash).
 */
export function safePathSegment(id: string): string {
  if (id.length === 0) return "%";
  const encoded = PLAIN_SEGMENT.test(id)
    ? id
    : Array.from(Buffer.from(id, "utf8"), (byte) => {
        const ch = String.fromCharCode(byte);
        return byte < 0x80 && PLAIN_SEGMENT.test(ch)
          ? ch
          : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
      }).join("");
  if (encoded.length <= MAX_SEGMENT_LENGTH) return encoded;
  return `%h${createHash("sha256").update(id, "utf8").digest("hex")}`;
}
