import { sessionServiceOver } from "@/test/setup/test-berth";
/**
 * Two API processes (web replicas: app router, agent services, one engine each) and two worker processes,
 * real Postgres and Redis: 40 concurrent `chat.send` turns, one per session of ONE fresh agent whose
 * PER_AGENT workspace nobody used yet. Every turn makes the (loopback fake) model call Bash in the
 * workspace, then answer. Exactly one provision, one workspace, every file in it, every turn stored.
 * 20 turns per API process are more than its database pool (8 connections) and the workers' concurrency
 * (4): the first uses race inside each process and across both, as 200 did at five times the cost (every
 * turn runs a sandboxed Bash and two model calls).
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { getConfig } from "@/server/config/config";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { composeEngine } from "@/server/composition/compose-engine";
import { processBerth } from "@/server/composition/process-berth";
import { hostFolderDriver } from "../../drivers/local/support/sandbox-env";
import { createLogger } from "@/server/logger";
import { createAgentService } from "@/server/modules/agent/agent.service";
import { listChatMessages } from "@/server/modules/session/session.data";
import { getWorkspace, listWorkspaceEvents } from "@/server/modules/workspace/workspace.data";
import { listWorkspaces } from "@/server/modules/workspace/workspace-list.data";
import { getQueues } from "@/server/queue/queues";
import { AppError } from "@/server/shared/errors";
import type { FakeTurn, RecordedRequest } from "@/test/fixtures/fake-model/script";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { createTestTenant } from "../db/fixtures";
import { testEngineConfig } from "../workspace/harness";
import type { TurnSummary } from "./chat-api-process";
import { makeControlDir, readProvisionLog, startChild, stopChildren, type Child } from "./processes";
import { closeProcessBerth } from "@/server/composition/process-berth";

const SESSIONS = 40;
const API_KEY = "sk-multiprocess-chat";

/** The text of a recorded message (a string, or the text parts of a content array). */
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((part: { text?: unknown }) => (typeof part.text === "string" ? part.text : "")).join("");
}

/**
 * The model of every session: a request ending with the user's "turn for <sessionId>" gets a Bash call that
 * writes turns/<sessionId>.txt in the workspace; a request ending with that tool's result gets the answer.
 * Keyed by the request, not by arrival order, because the conversations interleave.
 */
function respond(request: RecordedRequest): FakeTurn | undefined {
  const last = request.messages.at(-1);
  if (last?.role === "tool") return { kind: "text", text: "Wrote the file." };
  const sessionId = /^turn for ([A-Za-z0-9_-]+)$/.exec(textOf(last?.content))?.[1];
  if (last?.role !== "user" || sessionId === undefined) return undefined;
  const command = `mkdir -p turns && echo ${sessionId} > turns/${sessionId}.txt && echo wrote`;
  return { kind: "tool-calls", calls: [{ name: "Bash", arguments: { command } }] };
}

describe("multi-process chat.send", { timeout: 180_000 }, () => {
  let children: Child[] = [];
  let fake: FakeModelServer | undefined;
  let basedir: string | undefined;
  let engine: WorkspaceEngine | undefined;

  afterEach(async (context) => {
    await stopChildren(children, context.task.result?.state === "fail");
    children = [];
    await fake?.close();
    await engine?.close();
    await closeProcessBerth();
    if (basedir) await fs.rm(basedir, { recursive: true, force: true });
  });

  it("40 concurrent turns of one fresh agent from two API processes, two workers → exactly one provision", async () => {
    basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-mp-chat-")));
    // The sandboxed backend's workspace uids must be able to pass through to their folders.
    await fs.chmod(basedir, 0o711);
    const controlDir = await makeControlDir(basedir);
    const workspacesDir = path.join(basedir, "workspaces");
    const env = {
      BERTH_REDIS_PREFIX: `${process.env.BERTH_REDIS_PREFIX}-mpchat-${randomBytes(3).toString("hex")}`,
      BERTH_WORKSPACE_BASEDIR: workspacesDir,
      MP_CONTROL_DIR: controlDir,
      WORKERS_CONCURRENCY: "4",
      // Warnings and errors: a failed test prints each child's last lines.
      LOG_LEVEL: "warn",
    };

    fake = await startFakeModel({ apiKey: API_KEY, respond });
    const tenant = await createTestTenant();
    // The same encryption key as the children (inherited environment), so they can decrypt the model key.
    const secretKey = secretKeyFromBytes(getConfig().secrets.encryptionKey);
    const agent = await createAgentService({
      audit: processBerth().audit,
      db: processBerth().db,
      secretKey,
      enqueueSessionPurge: () => Promise.reject(new AppError("INTERNAL", "not used here")),
      enqueueAgentPurge: () => Promise.reject(new AppError("INTERNAL", "not used here")),
      assertBackendChoosable: () => undefined,
    }).create(tenant.scope, {
      name: `mp-chat-${randomBytes(3).toString("hex")}`,
      modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: API_KEY },
      isolationPolicy: "PER_AGENT",
    });
    // The session service as session.create runs it, over this process' own workspace service (it only
    // writes the PENDING binding: nothing here provisions or enqueues).
    engine = composeEngine({
      quota: () => processBerth().quota,
      attachTracker: () => processBerth().attachTracker,
      usage: () => processBerth().usage,
      stageSamples: () => processBerth().stageSamples,
      lifecycle: processBerth().lifecycle,
      encryptionKey: processBerth().config.secrets.encryptionKey,
      db: processBerth().db,
      config: testEngineConfig(workspacesDir),
      queues: getQueues(),
      secret: "multiprocess-test-secret",
      log: createLogger({ level: "silent" }),
    });
    const sessionService = sessionServiceOver(engine);
    const create = () => sessionService.create(tenant.scope, { agentId: agent.id });
    // The first alone (it inserts the PENDING workspace row), the rest in small batches.
    const first = await create();
    const sessions = [first];
    while (sessions.length < SESSIONS) {
      const batch = Math.min(10, SESSIONS - sessions.length);
      sessions.push(...(await Promise.all(Array.from({ length: batch }, create))));
    }
    const workspaceId = first.workspaceId;
    expect(new Set(sessions.map((s) => s.workspaceId))).toEqual(new Set([workspaceId]));
    expect(new Set(sessions.map((s) => s.sessionId)).size).toBe(SESSIONS);
    expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("PENDING");

    const workers = [startChild("worker-process.ts", env), startChild("worker-process.ts", env)];
    children.push(...workers);
    const halves = [sessions.slice(0, SESSIONS / 2), sessions.slice(SESSIONS / 2)];
    const apis = halves.map((half) =>
      startChild("chat-api-process.ts", {
        ...env,
        MP_TENANT_ID: tenant.tenantId,
        MP_USER_ID: tenant.owner.id,
        MP_USER_EMAIL: tenant.owner.email,
        MP_SESSION_IDS: half.map((s) => s.sessionId).join(","),
      }),
    );
    children.push(...apis);
    await Promise.all([...workers, ...apis].map((child) => child.nextLine((l) => l === "ready")));
    for (const api of apis) api.process.stdin.write("go\n");
    const outputs = await Promise.all(apis.map((api) => api.nextLine((l) => l.startsWith("["))));
    const summaries = outputs.flatMap((line) => JSON.parse(line) as TurnSummary[]);

    // Every turn: the Bash call ran without error, the answer streamed, and the stream ended with `done`.
    expect(summaries.map((s) => s.sessionId).sort()).toEqual(sessions.map((s) => s.sessionId).sort());
    const unhappy = summaries.filter(
      (s) =>
        s.status !== "completed" ||
        s.errors.length > 0 ||
        s.types.at(-1) !== "done" ||
        !s.types.includes("text-delta") ||
        s.toolResults.length !== 1 ||
        s.toolResults[0]!.toolName !== "Bash" ||
        s.toolResults[0]!.isError ||
        !s.toolResults[0]!.output.includes("wrote"),
    );
    expect({ failed: unhappy.length, examples: unhappy.slice(0, 3) }).toEqual({ failed: 0, examples: [] });
    expect(fake.unexpectedRequests).toHaveLength(0);
    expect(fake.requests).toHaveLength(2 * SESSIONS);

    // One provision (logged by whichever worker ran it), one workspace record, one folder on disk.
    const provisions = await readProvisionLog(controlDir);
    expect(provisions.filter((l) => l.startsWith("start")).map((l) => l.split(" ")[2])).toEqual([
      workspaceId,
    ]);
    expect(provisions.filter((l) => l.startsWith("done")).map((l) => l.split(" ")[2])).toEqual([workspaceId]);
    expect(
      await listWorkspaceEvents(tenant.scope, workspaceId, { kinds: ["provisioning"] }, processBerth().db),
    ).toHaveLength(1);
    const records = await listWorkspaces(tenant.scope, { limit: 10 }, processBerth().db);
    expect(records.items.map((w) => [w.id, w.state])).toEqual([[workspaceId, "READY"]]);
    const resources = await hostFolderDriver(workspacesDir).listResources();
    expect(resources.map((r) => [r.tenantId, r.workspaceId])).toEqual([[tenant.tenantId, workspaceId]]);

    // Every turn's tool wrote into that one folder, each its own file.
    const workdir = resources[0]!.locator;
    expect((await fs.readdir(path.join(workdir, "turns"))).sort()).toEqual(
      sessions.map((s) => `${s.sessionId}.txt`).sort(),
    );
    const contents = await Promise.all(
      sessions.map((s) => fs.readFile(path.join(workdir, "turns", `${s.sessionId}.txt`), "utf8")),
    );
    expect(contents).toEqual(sessions.map((s) => `${s.sessionId}\n`));

    // Every turn was stored before its `done`: user, assistant (tool call), tool result, assistant answer.
    const histories = await Promise.all(
      sessions.map(async (s) =>
        (await listChatMessages(tenant.scope, s.sessionId, undefined, processBerth().db)).map((m) => m.role),
      ),
    );
    const incomplete = histories.filter((roles) => roles.join() !== "user,assistant,tool,assistant");
    expect({ incomplete: incomplete.length, examples: incomplete.slice(0, 3) }).toEqual({
      incomplete: 0,
      examples: [],
    });
  });
});
