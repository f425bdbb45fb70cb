import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { assignWorkspaceId, IsolationPolicy } from "@/server/workspace/manager/isolation";
import { createLocalWorkspaceManager } from "@/server/workspace/manager/local-workspace-manager";
import { MinHeap } from "@/server/workspace/manager/min-heap";
import {
  WorkspaceManager,
  type EvictReason,
  type WorkspaceManagerOptions,
} from "@/server/workspace/manager/workspace-manager";
import { TestAttacher } from "./test-attacher";

let basedir: string;
let clock: number;
const managers: WorkspaceManager[] = [];
const now = () => clock;

beforeEach(async () => {
  basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-mgr-")));
  clock = 1_000;
});
afterEach(async () => {
  await Promise.all(managers.splice(0).map((manager) => manager[Symbol.asyncDispose]()));
  await fs.rm(basedir, { recursive: true, force: true });
});

function setup(options: Partial<WorkspaceManagerOptions> & { kind?: "local" | "docker" } = {}) {
  const attacher = new TestAttacher(basedir, options.kind ?? "local");
  const evictions: Array<{ id: string; reason: EvictReason }> = [];
  const provisions: Array<{ id: string; replaced: boolean }> = [];
  const manager = new WorkspaceManager({
    attacher,
    evictIntervalMs: null,
    now,
    hooks: {
      onEvict: (event) => evictions.push({ id: event.address.workspaceId, reason: event.reason }),
      onAttach: (event) => provisions.push({ id: event.address.workspaceId, replaced: event.replaced }),
    },
    ...options,
  });
  managers.push(manager);
  return { attacher, manager, evictions, provisions };
}

const who = { tenantId: "t1", userId: "u1", agentId: "a1" };

describe("getWorkspace", () => {
  it("returns an initialised workspace whose id follows the isolation policy", async () => {
    const { manager } = setup();
    const workspace = await manager.getWorkspace(who);
    expect(workspace.id).toBe(assignWorkspaceId(IsolationPolicy.PER_AGENT, who));
    expect(workspace.isInitialized).toBe(true);
    expect(await manager.getWorkspace(who)).toBe(workspace);
    expect(await manager.getWorkspace({ ...who, workspaceId: workspace.id })).toBe(workspace);
  });

  it("1,000 concurrent calls for one id provision and initialise exactly once", async () => {
    const { manager, attacher } = setup();
    const results = await Promise.all(Array.from({ length: 1000 }, () => manager.getWorkspace(who)));
    expect(attacher.attaches).toHaveLength(1);
    expect(new Set(results).size).toBe(1);
  });

  it("200 ids provision in parallel (every provision waits at a 200-party barrier)", async () => {
    const { manager, attacher } = setup();
    attacher.holdUntil(200);
    const workspaces = await Promise.all(
      Array.from({ length: 200 }, (_, i) => manager.getWorkspace({ ...who, agentId: `agent-${i}` })),
    );
    // Serialised provisioning would deadlock at the barrier; reaching here means all 200 were in flight.
    expect(attacher.maxConcurrent).toBe(200);
    expect(new Set(workspaces.map((w) => w.id)).size).toBe(200);
    expect(manager.size).toBe(200);
  });

  it("a slow provision does not block hits or misses for other ids", async () => {
    const { manager, attacher } = setup();
    const cached = await manager.getWorkspace({ ...who, agentId: "fast" });
    attacher.holdUntil(2);
    const slow = manager.getWorkspace({ ...who, agentId: "slow" });
    expect(await manager.getWorkspace({ ...who, agentId: "fast" })).toBe(cached);
    // The second held provision releases both: the slow one was waiting, not blocking.
    const other = await manager.getWorkspace({ ...who, agentId: "other" });
    expect((await slow).id).not.toBe(other.id);
  });

  it("a failed provision is cleaned up, not cached, and retried by the next call", async () => {
    const { manager, attacher } = setup();
    attacher.failuresLeft = 1;
    const errors: string[] = [];
    const failing = new WorkspaceManager({
      attacher,
      evictIntervalMs: null,
      hooks: { onAttachError: (event) => errors.push(event.error.message) },
    });
    managers.push(failing);
    const attempts = await Promise.allSettled(Array.from({ length: 10 }, () => failing.getWorkspace(who)));
    expect(attempts.every((a) => a.status === "rejected")).toBe(true);
    expect(attacher.attaches).toHaveLength(1);
    expect(errors).toEqual(["attach failed on purpose"]);
    expect(failing.size).toBe(0);

    attacher.breakNextLayout = true;
    await expect(manager.getWorkspace(who)).rejects.toThrow("disk full");
    expect(attacher.detaches).toEqual([
      { workdir: path.join(basedir, "t1", "u1", manager.workspaceIdFor(who)) },
    ]);
    expect(manager.size).toBe(0);
    const workspace = await manager.getWorkspace(who);
    expect(workspace.isInitialized).toBe(true);
  });

  it("keys by tenant and user: the same workspace id elsewhere is another workspace and directory", async () => {
    const { manager } = setup();
    const a = await manager.getWorkspace({ ...who, workspaceId: "shared" });
    const b = await manager.getWorkspace({ ...who, userId: "u2", workspaceId: "shared" });
    const c = await manager.getWorkspace({ ...who, tenantId: "t2", workspaceId: "shared" });
    expect(new Set([a, b, c]).size).toBe(3);
    expect(new Set([a.workdir, b.workdir, c.workdir]).size).toBe(3);
    expect(a.workdir).toBe(path.join(basedir, "t1", "u1", "shared"));
  });

  it("PER_USER shares one workspace across agents; PER_SESSION mints one per call", async () => {
    const perUser = setup({ isolation: IsolationPolicy.PER_USER }).manager;
    expect(await perUser.getWorkspace({ ...who, agentId: "x" })).toBe(
      await perUser.getWorkspace({ ...who, agentId: "y" }),
    );
    const perSession = setup({ isolation: IsolationPolicy.PER_SESSION }).manager;
    const one = await perSession.getWorkspace({ ...who, sessionId: "s" });
    const two = await perSession.getWorkspace({ ...who, sessionId: "s" });
    expect(one).not.toBe(two);
    expect(one.id).toMatch(/^[0-9a-f]{32}$/);
  });
});

describe("liveness", () => {
  it("re-checks sandboxed workspaces at most every interval and re-provisions dead ones", async () => {
    const { manager, attacher, evictions, provisions } = setup({ kind: "docker", livenessIntervalMs: 5_000 });
    const first = await manager.getWorkspace(who);
    attacher.dead.add(first.machine);
    clock += 4_000;
    expect(await manager.getWorkspace(who)).toBe(first); // within the interval: no check
    clock += 2_000;
    const results = await Promise.all(Array.from({ length: 50 }, () => manager.getWorkspace(who)));
    const second = results[0]!;
    expect(new Set(results).size).toBe(1);
    expect(second).not.toBe(first);
    expect(second.isInitialized).toBe(true);
    expect(first.isInitialized).toBe(false);
    expect(attacher.attaches).toHaveLength(2);
    expect(evictions).toEqual([{ id: first.id, reason: "dead" }]);
    expect(provisions.map((p) => p.replaced)).toEqual([false, true]);
  });

  it("replaces a cached workspace that was closed directly, even without liveness checks", async () => {
    const { manager } = setup();
    const first = await manager.getWorkspace(who);
    await first.close();
    const second = await manager.getWorkspace(who);
    expect(second).not.toBe(first);
    expect(second.isInitialized).toBe(true);
  });

  it("does not check local workspaces by default", async () => {
    const { manager, attacher } = setup();
    const first = await manager.getWorkspace(who);
    attacher.dead.add(first.machine);
    clock += 1_000_000;
    expect(await manager.getWorkspace(who)).toBe(first);
  });
});

describe("TTL, close and closeAll", () => {
  it("evicts only idle workspaces when their TTL passes, keeping recently used ones", async () => {
    const { manager, evictions } = setup({ ttlMs: 10_000 });
    const idle = await manager.getWorkspace({ ...who, agentId: "idle" });
    const busy = await manager.getWorkspace({ ...who, agentId: "busy" });
    clock += 9_000;
    await manager.getWorkspace({ ...who, agentId: "busy" });
    expect(await manager.evictIdle()).toBe(0);
    clock += 1_500;
    expect(await manager.evictIdle()).toBe(1);
    expect(evictions).toEqual([{ id: idle.id, reason: "ttl" }]);
    expect(idle.isInitialized).toBe(false);
    expect(busy.isInitialized).toBe(true);
    clock += 9_000;
    expect(await manager.evictIdle()).toBe(1);
    expect(manager.size).toBe(0);
    // An evicted id comes back on the next request.
    expect((await manager.getWorkspace({ ...who, agentId: "idle" })).isInitialized).toBe(true);
  });

  it("never evicts a workspace that work pins, however long it runs; the idle time starts at its release", async () => {
    const { manager, evictions } = setup({ ttlMs: 10_000 });
    const pinned = await manager.getWorkspace({ ...who, agentId: "long-turn" });
    const release = manager.pin(pinned);
    const second = manager.pin(pinned);
    clock += 35_000; // three TTLs into one long turn
    expect(await manager.evictIdle()).toBe(0);
    release();
    release(); // idempotent: the other pin still counts
    clock += 11_000;
    expect(await manager.evictIdle()).toBe(0);
    expect(pinned.isInitialized).toBe(true);
    second();
    clock += 9_000;
    expect(await manager.evictIdle()).toBe(0); // idle for 9 s since the last release
    clock += 1_500;
    expect(await manager.evictIdle()).toBe(1);
    expect(evictions).toEqual([{ id: pinned.id, reason: "ttl" }]);
    // A workspace this manager no longer caches needs no pin (and its release changes nothing).
    manager.pin(pinned)();
    expect(manager.size).toBe(0);
  });

  it("evicts each workspace after its tenant's idle TTL, and a changed TTL applies to cached ones", async () => {
    const tenantTtls = new Map([["short", 2_000]]);
    const { manager, evictions } = setup({
      ttlMs: 10_000,
      tenantTtls: () => Promise.resolve(new Map(tenantTtls)),
    });
    expect(await manager.evictIdle()).toBe(0); // the first pass reads the tenants' TTLs
    const short = await manager.getWorkspace({ ...who, tenantId: "short" });
    const other = await manager.getWorkspace({ ...who, tenantId: "other" });
    clock += 2_500;
    expect(await manager.evictIdle()).toBe(1);
    expect(evictions).toEqual([{ id: short.id, reason: "ttl" }]);
    expect(other.isInitialized).toBe(true);

    // Tenant "other" shortens its TTL while its workspace is cached: the next pass detaches it.
    tenantTtls.set("other", 2_000);
    expect(await manager.evictIdle()).toBe(1);
    expect(other.isInitialized).toBe(false);

    // A lengthened TTL (back to the installation's): a workspace queued at the short one stays.
    const again = await manager.getWorkspace({ ...who, tenantId: "other" });
    tenantTtls.delete("other");
    clock += 2_500;
    expect(await manager.evictIdle()).toBe(0);
    expect(again.isInitialized).toBe(true);
    clock += 8_000;
    expect(await manager.evictIdle()).toBe(1);
    // A failed read keeps the TTLs of the previous pass.
    const kept = setup({
      ttlMs: 10_000,
      tenantTtls: () => Promise.reject(new Error("database down")),
    });
    await kept.manager.getWorkspace(who);
    clock += 10_500;
    expect(await kept.manager.evictIdle()).toBe(1);
  });

  it("close(address) closes and forgets one workspace; closeAll closes all and stays usable", async () => {
    const { manager, evictions } = setup();
    const a = await manager.getWorkspace({ ...who, agentId: "a" });
    const b = await manager.getWorkspace({ ...who, agentId: "b" });
    await manager.close({ tenantId: "t1", userId: "u1", workspaceId: a.id });
    await manager.close({ tenantId: "t1", userId: "u1", workspaceId: "unknown" });
    expect(a.isInitialized).toBe(false);
    expect(manager.peek({ tenantId: "t1", userId: "u1", workspaceId: b.id })).toBe(b);
    await manager.closeAll();
    expect(b.isInitialized).toBe(false);
    expect(evictions.map((e) => e.reason)).toEqual(["closed", "close_all"]);
    expect((await manager.getWorkspace({ ...who, agentId: "a" })).isInitialized).toBe(true);
  });

  it("close waits for an in-flight provision", async () => {
    const { manager, attacher } = setup();
    attacher.holdUntil(2);
    const pending = manager.getWorkspace(who);
    let closed = false;
    const closing = manager
      .close({ tenantId: "t1", userId: "u1", workspaceId: manager.workspaceIdFor(who) })
      .then(() => (closed = true));
    await Promise.resolve();
    expect(closed).toBe(false);
    await manager.getWorkspace({ ...who, agentId: "releases-the-barrier" });
    await closing;
    expect((await pending).isInitialized).toBe(false);
    expect(manager.size).toBe(1);
  });

  it("await using closes everything", async () => {
    let workspace;
    {
      await using manager = createLocalWorkspaceManager({ basedir, evictIntervalMs: 50 });
      workspace = await manager.getWorkspace(who);
      expect(workspace.workdir).toBe(path.join(basedir, "t1", "u1", manager.workspaceIdFor(who)));
    }
    expect(workspace.isInitialized).toBe(false);
  });
});

describe("MinHeap", () => {
  it("pops in key order", () => {
    const heap = new MinHeap<number>();
    const keys = Array.from({ length: 500 }, (_, i) => (i * 7919) % 503);
    for (const key of keys) heap.push(key, key);
    const out: number[] = [];
    for (let item = heap.pop(); item; item = heap.pop()) out.push(item.key);
    expect(out).toEqual([...keys].sort((a, b) => a - b));
  });
});
