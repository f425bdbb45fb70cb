import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { TurnTimer } from "@/server/modules/chat/turn-timer";
import { turnUsage } from "@/server/modules/chat/turn-quota";
import { getRedis } from "@/server/redis";
import { attachThrough } from "@/server/workspace/drivers/driver";
import { createHostFolderDriver } from "@/server/workspace/manager/local-workspace-manager";
import { WorkspaceManager } from "@/server/workspace/manager/workspace-manager";
import { createBuiltinTools } from "@/server/workspace/tools";
import { deleteRedisKeys } from "@/scripts/services/redis";
import { nsPerAsyncOp, result, type BenchResult } from "./lib";
import { closeProcessBerth, processBerth } from "@/server/composition/process-berth";

/**
 * Recording stays off the hot path (issue 16): a builtin tool call (Read of a small file on a local
 * workspace) with a turn's timing recorded around it, against the same call bare; and what a turn's end
 * records (its stage samples, un-awaited, and its metering, one awaited RPUSH plus a deduplicated flush
 * request) against one awaited RPUSH of the same bytes, the floor of any buffered write. The real buffers, on the machine's Redis (REDIS_URL or the local
 * default) under a throwaway prefix.
 */
const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379";
const who = { tenantId: "tenant-bench", userId: "user-bench", agentId: "agent-bench" };

export async function run(): Promise<BenchResult[]> {
  const redisUrl = process.env.REDIS_URL ?? DEFAULT_REDIS_URL;
  const prefix = `bench-rec-${randomBytes(4).toString("hex")}`;
  const saved = { REDIS_URL: process.env.REDIS_URL, BERTH_REDIS_PREFIX: process.env.BERTH_REDIS_PREFIX };
  // The buffers read their Redis from the configuration on first use: set before anything records.
  Object.assign(process.env, { REDIS_URL: redisUrl, BERTH_REDIS_PREFIX: prefix });
  const basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-bench-rec-")));
  const manager = new WorkspaceManager({
    attacher: attachThrough(createHostFolderDriver({ basedir })),
    evictIntervalMs: null,
  });
  try {
    const workspace = await manager.getWorkspace(who);
    await workspace.machine.writeFile("notes.txt", "a line of notes\n".repeat(200));
    const read = createBuiltinTools(workspace, { readState: null }).find((tool) => tool.name === "Read")!;
    const input = { file_path: path.join(workspace.machine.workdir, "notes.txt") };
    const record = { id: workspace.id, backendKind: "local" };
    const onError = (error: unknown) => {
      throw error;
    };
    const first = await read.execute(input);
    if (first.isError) throw new Error(`the Read tool failed: ${first.content}`);
    const bare = () => read.execute(input);
    const timer = new TurnTimer(
      { tenantId: who.tenantId, record, requestedAt: Date.now() },
      processBerth().stageSamples,
    );
    const timed = async () => {
      timer.observe({ type: "tool-call", toolCallId: "call-1", toolName: "Read", input });
      const answer = await read.execute(input);
      timer.observe({
        type: "tool-result",
        toolCallId: "call-1",
        toolName: "Read",
        output: answer.content,
        isError: answer.isError,
      });
      return answer;
    };
    const session = { id: "session-bench", agentId: who.agentId, userId: who.userId };
    const usage = turnUsage(
      { tenantId: who.tenantId, userId: who.userId } as Parameters<typeof turnUsage>[0],
      session as Parameters<typeof turnUsage>[1],
      { usage: { inputTokens: 1_200, outputTokens: 300 } } as Parameters<typeof turnUsage>[2],
      { toolCalls: 1, backend: "local", workspaceId: workspace.id },
    );
    const turnEnd = async () => {
      new TurnTimer(
        { tenantId: who.tenantId, record, requestedAt: Date.now() },
        processBerth().stageSamples,
      ).finish(true, onError);
      await processBerth().usage.record(usage);
    };
    const lines = usage.map((entry) => JSON.stringify(entry));
    const floorKey = `${prefix}:floor`;
    const rpush = () => getRedis().rpush(floorKey, ...lines);
    // Interleaved rounds, best of each, so JIT warm-up and GC pauses favour neither side.
    let bareNs = Number.POSITIVE_INFINITY;
    let timedNs = Number.POSITIVE_INFINITY;
    let turnEndNs = Number.POSITIVE_INFINITY;
    let rpushNs = Number.POSITIVE_INFINITY;
    for (let round = 0; round < 3; round++) {
      bareNs = Math.min(bareNs, await nsPerAsyncOp(bare, 500, 3));
      timedNs = Math.min(timedNs, await nsPerAsyncOp(timed, 500, 3));
      turnEndNs = Math.min(turnEndNs, await nsPerAsyncOp(turnEnd, 200, 3));
      rpushNs = Math.min(rpushNs, await nsPerAsyncOp(rpush, 200, 3));
    }
    const baseline = "the same Read tool call, nothing recorded";
    return [
      result({
        name: "tool call with the turn's timing recorded",
        value: timedNs / 1_000,
        unit: "µs/call",
        baseline,
        baselineValue: bareNs / 1_000,
        target: { atMost: 1.1 },
      }),
      result({
        name: "a turn's end: stage samples and metering recorded",
        value: turnEndNs / 1_000,
        unit: "µs/turn",
        baseline: "one awaited RPUSH of the turn's usage lines",
        baselineValue: rpushNs / 1_000,
        goal: "≤ 4× (once per turn, after the model ran)",
      }),
    ];
  } finally {
    await manager.closeAll();
    await closeProcessBerth();
    await deleteRedisKeys(redisUrl, `${prefix}*`);
    await fs.rm(basedir, { recursive: true, force: true });
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}
