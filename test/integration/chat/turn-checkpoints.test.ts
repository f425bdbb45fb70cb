import { randomUUID } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createLogger } from "@/server/logger";
import { pruneCheckpoints } from "@/server/modules/checkpoint/checkpoint-prune.service";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { rejectionCode } from "../api/support/call-by-path";
import { sendChat, startAgentApiHarness, type AgentApiHarness } from "../agent/support";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

/**
 * Turn checkpoints (issue 24) end to end: real turns whose Bash changes the workspace (real Postgres,
 * Redis, workers and a bubblewrap-confined local workspace; only the model is the loopback fake), each
 * recorded at its end; a diff of what a turn did; a revert that brings deleted files back and marks the
 * later turn reverted; two concurrent reverts (one wins); and a fork that starts as the checkpoint.
 */
const EVERYTHING_ENTRY = path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js");

let h: AgentApiHarness;
let fake: FakeModelServer;

beforeAll(async () => {
  h = await startAgentApiHarness("checkpoints");
  fake = await startFakeModel({ apiKey: "sk-cp" });
});
afterAll(async () => {
  await fake.close();
  await h.close();
  await closeProcessBerth();
});

/** One turn whose model runs `command` in Bash, then answers; the tool's output. */
async function bash(sessionId: string, command: string): Promise<string> {
  fake.enqueue(
    {
      kind: "tool-calls",
      calls: [{ id: `c_${randomUUID().slice(0, 8)}`, name: "Bash", arguments: { command } }],
    },
    { kind: "text", text: "done" },
  );
  const events = await sendChat(h.owner, { ...h.ref, sessionId, message: command });
  expect(events.at(-1)).toMatchObject({ type: "done", status: "completed" });
  const result = events.find((event) => event.type === "tool-result") as { output: string } | undefined;
  return result?.output ?? "";
}

/** Reads the restore until it has ended (the workers write the files): bounded by the test's timeout. */
async function restoreEnd(restoreId: string) {
  for (;;) {
    const restore = await h.owner.checkpoint.restore({ ...h.ref, restoreId });
    if (restore.status !== "RUNNING") return restore;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe("turn checkpoints", () => {
  it("records every turn, diffs it, reverts it and forks from it", { timeout: 120_000 }, async () => {
    const agent = await h.owner.agent.create({
      ...h.ref,
      name: `cp-${randomUUID().slice(0, 6)}`,
      modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: "sk-cp" },
    });
    const { sessionId, workspaceId } = await h.owner.session.create({ ...h.ref, agentId: agent.id });
    await bash(sessionId, "mkdir -p src && printf 'one\\ntwo\\n' > src/a.txt && echo keep > keep.txt");
    await bash(sessionId, "rm -rf src && echo new > b.txt");

    const checkpoints = await h.owner.checkpoint.list({ ...h.ref, sessionId });
    expect(checkpoints.map((c) => [c.status, c.added, c.changed, c.removed])).toEqual([
      ["READY", 2, 0, 0],
      ["READY", 1, 0, 1],
    ]);
    const [first, second] = checkpoints as [(typeof checkpoints)[0], (typeof checkpoints)[0]];
    expect(second.turn?.message).toContain("rm -rf src");

    // What the second turn did, and the removed file's text diff.
    const diff = await h.owner.checkpoint.diff({ ...h.ref, sessionId, checkpointId: second.id });
    expect(diff.files.map((file) => `${file.kind} ${file.path}`)).toEqual([
      "added b.txt",
      "removed src/a.txt",
    ]);
    const fileDiff = await h.owner.checkpoint.fileDiff({
      ...h.ref,
      sessionId,
      checkpointId: second.id,
      path: "src/a.txt",
    });
    expect(fileDiff.diff).toContain("-one\n-two");
    expect(
      await rejectionCode(h.viewer.checkpoint.revert({ ...h.ref, sessionId, checkpointId: first.id })),
    ).toBe("FORBIDDEN");

    // Two reverts at once: one begins, the other is a typed CONFLICT.
    const outcomes = await Promise.allSettled([
      h.owner.checkpoint.revert({ ...h.ref, sessionId, checkpointId: first.id }),
      h.owner.checkpoint.revert({ ...h.ref, sessionId, checkpointId: first.id }),
    ]);
    const begun = outcomes.flatMap((outcome) => (outcome.status === "fulfilled" ? [outcome.value] : []));
    expect(begun).toHaveLength(1);
    const refused = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected");
    expect(refused?.reason).toMatchObject({ code: "CONFLICT" });
    expect(await restoreEnd(begun[0]!.restoreId)).toMatchObject({ status: "DONE", written: 1, deleted: 1 });

    // The files are back, and the reverted turn is marked (kept in the transcript).
    expect(await bash(sessionId, "cat src/a.txt keep.txt; test -e b.txt || echo b.txt-gone")).toBe(
      "one\ntwo\nkeep\nb.txt-gone\n",
    );
    // That turn changed nothing: its checkpoint compares with the state the revert wrote, not the
    // reverted turn's.
    const afterRevert = (await h.owner.checkpoint.list({ ...h.ref, sessionId })).at(-1)!;
    expect([afterRevert.added, afterRevert.changed, afterRevert.removed]).toEqual([0, 0, 0]);
    const history = await h.owner.chat.history({ ...h.ref, sessionId });
    const reverted = history.filter((message) => message.reverted);
    expect(reverted.length).toBeGreaterThan(0);
    expect(JSON.stringify(reverted)).toContain("rm -rf src");
    // The model was not shown the reverted turn on the next one.
    expect(JSON.stringify(fake.requests.at(-1))).not.toContain("rm -rf src");

    // A fork from the first turn: its own workspace, the first turn's files and transcript.
    const fork = await h.owner.checkpoint.fork({ ...h.ref, sessionId, checkpointId: first.id, name: "fork" });
    expect(fork.workspaceId).not.toBe(workspaceId);
    expect(await restoreEnd(fork.restoreId)).toMatchObject({ status: "DONE" });
    const forkHistory = await h.owner.chat.history({ ...h.ref, sessionId: fork.sessionId });
    expect(JSON.stringify(forkHistory)).toContain("printf");
    expect(JSON.stringify(forkHistory)).not.toContain("cat src/a.txt");
    expect(await bash(fork.sessionId, "cat src/a.txt keep.txt; test -e b.txt || echo b.txt-gone")).toBe(
      "one\ntwo\nkeep\nb.txt-gone\n",
    );
    // The revert is undoable: the folder as it was just before it is a checkpoint of its own, and
    // reverting to it brings back the reverted turn's files and unmarks the turn.
    const listed = await h.owner.checkpoint.list({ ...h.ref, sessionId });
    expect(listed.map((c) => c.kind)).toEqual(["TURN", "TURN", "BEFORE_REVERT", "TURN"]);
    const undo = await h.owner.checkpoint.revert({ ...h.ref, sessionId, checkpointId: listed[2]!.id });
    expect(await restoreEnd(undo.restoreId)).toMatchObject({ status: "DONE" });
    const afterUndo = await h.owner.checkpoint.list({ ...h.ref, sessionId });
    expect(afterUndo.filter((c) => c.kind === "TURN").map((c) => c.turn?.reverted)).toEqual([
      false,
      false,
      true,
    ]);
    expect(await bash(sessionId, "cat b.txt keep.txt; test -e src || echo src-gone")).toBe(
      "new\nkeep\nsrc-gone\n",
    );
  });
});

describe("the agent's Changes tool, and risky turns", () => {
  it(
    "lists what this turn changed so far (Bash included) and diffs a file",
    { timeout: 60_000 },
    async () => {
      const agent = await h.owner.agent.create({
        ...h.ref,
        name: `cp-changes-${randomUUID().slice(0, 6)}`,
        modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: "sk-cp" },
      });
      const { sessionId, workspaceId } = await h.owner.session.create({ ...h.ref, agentId: agent.id });
      await bash(sessionId, "printf 'a\\n' > a.txt && echo gone > old.txt");
      fake.enqueue(
        {
          kind: "tool-calls",
          calls: [
            {
              id: "c_b",
              name: "Bash",
              arguments: { command: "echo b >> a.txt && rm old.txt && echo n > new.txt" },
            },
          ],
        },
        { kind: "tool-calls", calls: [{ id: "c_c", name: "Changes", arguments: { path: "a.txt" } }] },
        { kind: "text", text: "checked" },
      );
      const events = await sendChat(h.owner, { ...h.ref, sessionId, message: "change and check" });
      const output = (events.filter((event) => event.type === "tool-result") as { output: string }[]).at(
        -1,
      )!.output;
      expect(output).toMatch(/^added\s+new\.txt \(2 B\)$/m);
      expect(output).toMatch(/^changed\s+a\.txt \(4 B\)$/m);
      expect(output).toMatch(/^removed\s+old\.txt/m);
      expect(output).toContain("+b");

      // A risky turn: what an upload changed since the last turn is recorded before the turn runs.
      await h.owner.workspace.files.write({ ...h.ref, workspaceId, path: "uploaded.txt", content: "up" });
      fake.enqueue({ kind: "text", text: "nothing to do" });
      const risky = await sendChat(h.owner, { ...h.ref, sessionId, message: "risky", checkpointFirst: true });
      expect(risky.at(-1)).toMatchObject({ type: "done", status: "completed" });
      const [before, end] = (await h.owner.checkpoint.list({ ...h.ref, sessionId })).slice(-2);
      expect(before).toMatchObject({ kind: "BEFORE_TURN", turnId: null, added: 1, status: "READY" });
      expect(end).toMatchObject({ kind: "TURN", added: 0, changed: 0, removed: 0 });
      const diff = await h.owner.checkpoint.diff({ ...h.ref, sessionId, checkpointId: before!.id });
      expect(diff.files.map((file) => `${file.kind} ${file.path}`)).toEqual(["added uploaded.txt"]);
    },
  );
});

describe("resume integrity", () => {
  it(
    "compares a recreated machine's folder with the last checkpoint and names what was lost",
    { timeout: 90_000 },
    async () => {
      const agent = await h.owner.agent.create({
        ...h.ref,
        name: `cp-resume-${randomUUID().slice(0, 6)}`,
        modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: "sk-cp" },
      });
      const { sessionId, workspaceId } = await h.owner.session.create({ ...h.ref, agentId: agent.id });
      // A real stdio MCP server of the session, running during the turn (a turn lists its tools).
      await h.owner.workspace.mcp.add({
        ...h.ref,
        workspaceId,
        agentId: agent.id,
        sessionId,
        declaration: {
          name: "scratch",
          is_stateful: true,
          mcp_config: { type: "stdio_mcp", command: process.execPath, args: [EVERYTHING_ENTRY, "stdio"] },
        },
      });
      await bash(
        sessionId,
        "echo a > a.txt && echo b > b.txt && mkdir -p sessions/old && echo r > sessions/old/r.txt",
      );
      await h.owner.workspace.stop({ ...h.ref, workspaceId });
      await vi.waitFor(
        async () =>
          expect((await getWorkspace(h.tenant.ownerScope, workspaceId, processBerth().db)).state).toBe(
            "STOPPED",
          ),
        { timeout: 60_000, interval: 100 },
      );
      // Lost while the workspace was stopped, behind Berth's back (a disk, a cleanup script, a lost volume).
      const entries = await fs.readdir(h.workspace.basedir, { recursive: true });
      const lost = entries.filter(
        (entry) =>
          entry.includes(workspaceId) &&
          (entry.endsWith(`${path.sep}b.txt`) || entry.endsWith(`${path.sep}r.txt`)),
      );
      expect(lost).toHaveLength(2);
      for (const entry of lost) await fs.rm(path.join(h.workspace.basedir, entry));

      // The next turn provisions the machine again; before it is READY its folder is compared.
      expect(await bash(sessionId, "cat a.txt")).toBe("a\n");
      const events = await h.owner.workspace.events({ ...h.ref, workspaceId, kinds: ["integrity_checked"] });
      expect(events.items).toHaveLength(1);
      expect(events.items[0]).toMatchObject({
        reason: expect.stringMatching(/without 2 .*MCP servers running then and not now: scratch/),
        data: expect.objectContaining({
          lostCount: 2,
          lost: ["b.txt", "sessions/old/r.txt"],
          changedCount: 0,
          offloadLost: ["sessions/old/r.txt"],
          mcpStopped: ["scratch"],
        }),
      });
    },
  );
});

describe("checkpoint retention", () => {
  it(
    "keeps the last K turns and what fits the storage cap, frees the rest, and goes with a purge",
    { timeout: 120_000 },
    async () => {
      const agent = await h.owner.agent.create({
        ...h.ref,
        name: `cp-keep-${randomUUID().slice(0, 6)}`,
        modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: "sk-cp" },
      });
      const { sessionId, workspaceId } = await h.owner.session.create({ ...h.ref, agentId: agent.id });
      // (The tenant's other sessions keep their checkpoints: the counts below are this session's.)
      // Four turns, each replacing one 400 KB file with new bytes: four blobs of 400 KB in the store.
      for (let turn = 0; turn < 4; turn += 1) await bash(sessionId, "head -c 400000 /dev/urandom > big.bin");
      const all = await h.owner.checkpoint.list({ ...h.ref, sessionId });
      expect(all).toHaveLength(4);
      const prune = () =>
        pruneCheckpoints(
          { db: processBerth().db, store: h.workspace.engine.checkpoints, graceMs: 0 },
          createLogger({ level: "silent" }),
        );
      const ours = async () => (await prune()).tenants.find((tenant) => tenant.tenantId === h.ref.tenantId)!;

      // Keep the last two turns: the oldest two rows go; the store keeps turn 2's blob too (turn 3's diff
      // compares with it) and frees turn 1's.
      await h.owner.tenant.setPolicy({ ...h.ref, checkpointKeepTurns: 2 });
      const kept = await ours();
      expect(kept.expired).toBeGreaterThanOrEqual(2);
      expect(kept.prunedBytes).toBeGreaterThanOrEqual(400_000);
      expect(kept.keptBytes).toBeGreaterThanOrEqual(3 * 400_000);
      expect((await h.owner.checkpoint.list({ ...h.ref, sessionId })).map((c) => c.id)).toEqual(
        all.slice(2).map((c) => c.id),
      );
      const oldestKept = all[2]!;
      const diff = await h.owner.checkpoint.diff({ ...h.ref, sessionId, checkpointId: oldestKept.id });
      expect(diff.files.map((file) => `${file.kind} ${file.path}`)).toEqual(["changed big.bin"]);
      expect(await ours()).toMatchObject({ expired: 0, prunedObjects: 0 });

      // A 1 MiB cap: the newest (always kept) reaches 800 KB with its base; the next would pass the cap
      // (and so would any older one of the tenant's).
      await h.owner.tenant.setPolicy({ ...h.ref, checkpointStorageBytes: 1_048_576 });
      const capped = await ours();
      expect(capped.expired).toBeGreaterThanOrEqual(1);
      expect(capped.keptBytes).toBeLessThanOrEqual(1_048_576);
      expect((await h.owner.checkpoint.list({ ...h.ref, sessionId })).map((c) => c.id)).toEqual([all[3]!.id]);

      // A purge deletes the workspace's checkpoints, and its receipt counts them.
      await h.owner.workspace.purge({ ...h.ref, workspaceId, reason: "retention test" });
      await vi.waitFor(
        async () =>
          expect((await getWorkspace(h.tenant.ownerScope, workspaceId, processBerth().db)).state).toBe(
            "PURGED",
          ),
        { timeout: 60_000, interval: 100 },
      );
      const [receipt] = await h.owner.workspace.purgeReceipts({
        ...h.ref,
        targetType: "workspace",
        targetId: workspaceId,
      });
      expect(receipt?.deleted).toMatchObject({ databaseRows: expect.objectContaining({ checkpoints: 1 }) });
      expect(await h.owner.checkpoint.list({ ...h.ref, sessionId })).toEqual([]);
      await h.owner.tenant.setPolicy({ ...h.ref, checkpointKeepTurns: null, checkpointStorageBytes: null });
    },
  );
});
