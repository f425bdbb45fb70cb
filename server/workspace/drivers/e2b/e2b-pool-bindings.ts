import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { FileNotFoundError, type Sandbox } from "e2b";
import { z } from "zod";
import type { WorkspaceSpec } from "@/server/workspace/drivers/driver";
import type { E2bClient, ListedSandbox } from "./e2b-client";
import { toAppError } from "./e2b-errors";
import { poolIdOf, SANDBOX_PATHS, ZMarker, type E2bHandle, type SandboxNaming } from "./e2b-naming";

/**
 * Whose a warm pool sandbox is. E2B metadata is fixed at create, so a bind cannot rename the sandbox; it
 * leaves two records instead:
 *   - the root-only marker inside the sandbox (`/opt/berth/workspace.json`, written with O_EXCL: a second
 *     bind to another workspace fails atomically). It is the authority, but only readable while the
 *     sandbox runs;
 *   - a host-side binding record in the runtime dir (`<runtime>/pool/<sandbox id>.json`, the folder the
 *     gateway credentials share between workers), readable while the sandbox is paused (a stopped
 *     workspace), so reconcile lists it without resuming it.
 * A pool sandbox is idle only when its marker was READ and is absent; when neither record can be read it
 * is `unknown`: neither idle (never discarded) nor a resource (never reaped).
 */
const ZPoolBinding = z.object({
  pool: z.string(),
  sandboxId: z.string(),
  workspaceId: z.string(),
  tenantId: z.string(),
  userId: z.string(),
  boundAt: z.string(),
});
type PoolBinding = z.infer<typeof ZPoolBinding>;

type PoolState =
  { state: "idle" } | { state: "bound"; workspaceId: string; tenantId: string } | { state: "unknown" };

function bindingPath(runtimeDir: string, sandboxId: string): string {
  return path.join(runtimeDir, "pool", `${sandboxId}.json`);
}

export async function readBinding(runtimeDir: string, sandboxId: string): Promise<PoolBinding | null> {
  const raw = await fs.readFile(bindingPath(runtimeDir, sandboxId), "utf8").catch(() => null);
  if (raw === null) return null;
  try {
    const parsed = ZPoolBinding.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

export async function writeBinding(runtimeDir: string, binding: PoolBinding): Promise<void> {
  const file = bindingPath(runtimeDir, binding.sandboxId);
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  // Whole or not at all: a reader never sees half a record (it would take the sandbox for unknown).
  const temporary = `${file}.${randomBytes(4).toString("hex")}`;
  await fs.writeFile(temporary, JSON.stringify(binding), { mode: 0o600, flag: "wx" });
  await fs.rename(temporary, file);
}

export async function removeBinding(runtimeDir: string, sandboxId: string): Promise<void> {
  await fs.rm(bindingPath(runtimeDir, sandboxId), { force: true });
}

/**
 * The marker inside a running sandbox, null when there is none (never bound), or "unreadable" when there
 * is one that does not parse: someone bound (or broke) it, so it is neither idle nor anyone's resource.
 */
async function readMarker(
  sandbox: Sandbox,
  requestTimeoutMs: number,
): Promise<z.infer<typeof ZMarker> | null | "unreadable"> {
  let text: string;
  try {
    text = await sandbox.files.read(SANDBOX_PATHS.marker, { user: "root", requestTimeoutMs });
  } catch (error) {
    if (error instanceof FileNotFoundError) return null;
    throw toAppError(error, "read the workspace marker", { sandboxId: sandbox.sandboxId });
  }
  try {
    const parsed = ZMarker.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : "unreadable";
  } catch {
    return "unreadable";
  }
}

/** Whether the host record names this workspace (a missing record says nothing: see `poolState`). */
function bindsTo(binding: PoolBinding, spec: WorkspaceSpec): boolean {
  return binding.workspaceId === spec.workspaceId && binding.tenantId === spec.tenantId;
}

/**
 * Whose the pool sandbox is: the host record when there is one (no E2B call); else the marker, read
 * through envd. A paused sandbox without a record (bound by a worker that does not share this runtime
 * dir, or an idle one E2B paused at its timeout) is resumed to read it, and paused again when bound; a
 * marker found is recorded on this host so that happens once. Failures answer `unknown`.
 */
export async function poolState(
  client: E2bClient,
  options: { runtimeDir: string; timeoutMs: number; requestTimeoutMs: number },
  listed: ListedSandbox,
  poolId: string,
): Promise<PoolState> {
  const record = await readBinding(options.runtimeDir, listed.sandboxId);
  if (record) return { state: "bound", workspaceId: record.workspaceId, tenantId: record.tenantId };
  try {
    const sandbox = await client.connect(listed.sandboxId, options.timeoutMs);
    if (!sandbox) return { state: "unknown" };
    const marker = await readMarker(sandbox, options.requestTimeoutMs);
    if (!marker) return { state: "idle" };
    if (marker === "unreadable") return { state: "unknown" };
    await writeBinding(options.runtimeDir, {
      pool: poolId,
      sandboxId: listed.sandboxId,
      workspaceId: marker.workspaceId,
      tenantId: marker.tenantId,
      userId: "",
      boundAt: new Date().toISOString(),
    });
    if (listed.state === "paused") await client.pause(listed.sandboxId);
    return { state: "bound", workspaceId: marker.workspaceId, tenantId: marker.tenantId };
  } catch {
    return { state: "unknown" };
  }
}

/**
 * The pool sandbox a bound workspace's handle names: `ok` when E2B has it, it is this installation's pool
 * machine of the handle's pool id, and no host record says it is another workspace's (without a record the
 * handle, which only `bind` gives out, is trusted: the marker inside is checked when it is provisioned).
 */
export async function boundPoolSandbox(
  client: E2bClient,
  runtimeDir: string,
  naming: SandboxNaming,
  handle: E2bHandle & { pool: string },
  spec: WorkspaceSpec,
): Promise<{ sandbox: ListedSandbox | null; state: "ok" | "gone" | "foreign" }> {
  const info = await client.info(handle.sandboxId);
  if (!info) return { sandbox: null, state: "gone" };
  const record = await readBinding(runtimeDir, handle.sandboxId);
  const ours = poolIdOf(info.metadata, naming) === handle.pool && (!record || bindsTo(record, spec));
  return ours ? { sandbox: info, state: "ok" } : { sandbox: null, state: "foreign" };
}
