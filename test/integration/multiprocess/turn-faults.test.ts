/**
 * Turn faults with real processes (issue 11): two web replicas over real HTTP (chat-http-process.ts) behind
 * a TCP balancer, one worker process, real Postgres and Redis, the bubblewrap backend running the turn's
 * Bash for real; only the model is the loopback fake. Each test breaks something mid-turn (Redis loses its
 * data, the API process running the turn is killed, the database goes away under it) and then checks the
 * invariants: one turn per session, no turn run twice, no lease left by a dead process, the session says
 * what happened, nothing internal reaches the client.
 */
import { randomBytes, randomUUID } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { TRPCClientError } from "@trpc/client";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { createBerthClient, type BerthClient } from "@/server/client";
import { loadRedisConfig } from "@/server/config/redis";
import { INTERRUPTED_MARKER } from "@/server/modules/chat/chat-turn.data";
import { listWorkspaceEvents, listWorkspaceLeases } from "@/server/modules/workspace/workspace.data";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { hostFolderDriver } from "../../drivers/local/support/sandbox-env";
import { createTenantFixture, type TenantFixture } from "../api/support/tenant-fixtures";
import { makeControlDir, startChild, stopChildren, type Child } from "./processes";
import { release, runsOf, scriptedModel, startRelay, wipeRedisPrefix, type Relay } from "./fault-support";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processApiRuntime } from "@/server/api/composition";
import { processBerth } from "@/server/composition/process-berth";

const MODEL_KEY = "sk-turn-faults";
const prefix = `${process.env.BERTH_REDIS_PREFIX}-faults-${randomBytes(3).toString("hex")}`;

let basedir: string;
let workspacesDir: string;
let env: Record<string, string>;
let fake: FakeModelServer;
let tenant: TenantFixture;
let agentId: string;
let redis: Redis;
let worker: Child;
const children: Child[] = [];
const relays: Relay[] = [];

/** A web replica; resolves once it serves (its URL's port). */
async function startApi(
  extraEnv: Record<string, string> = {},
): Promise<{ child: Child; port: number; url: string }> {
  const child = startChild("chat-http-process.ts", { ...env, ...extraEnv });
  children.push(child);
  const url = (await child.nextLine((line) => line.startsWith("ready "))).slice("ready ".length);
  return { child, port: Number(new URL(url).port), url };
}

function clientOf(url: string): BerthClient {
  return createBerthClient({ url, apiKey: tenant.adminKey.plainKey });
}

async function newSession(client: BerthClient): Promise<{ sessionId: string; workspaceId: string }> {
  return client.session.create.mutate({ agentId });
}

/** The workspace's folder on the host (the bubblewrap backend's), once provisioned. */
async function workdirOf(workspaceId: string): Promise<string> {
  return vi.waitFor(
    async () => {
      const resources = await hostFolderDriver(workspacesDir).listResources();
      const found = resources.find((resource) => resource.workspaceId === workspaceId);
      if (!found) throw new Error(`workspace ${workspaceId} has no folder yet`);
      return found.locator;
    },
    { timeout: 60_000, interval: 100 },
  );
}

/** Waits (bounded) until the turn's Bash has run its side effect: the turn is mid-tool. */
async function untilBashRan(workspaceId: string, tag: string): Promise<string> {
  const workdir = await workdirOf(workspaceId);
  await vi.waitFor(async () => expect(await runsOf(workdir, tag)).toBe(1), { timeout: 60_000, interval: 50 });
  return workdir;
}

function modelRequestsFor(tag: string, role: "user" | "tool"): number {
  return fake.requests.filter((request) => {
    const last = request.messages.at(-1);
    const lastUser = [...request.messages].reverse().find((message) => message.role === "user");
    return last?.role === role && JSON.stringify(lastUser?.content ?? "").includes(` ${tag}`);
  }).length;
}

beforeAll(async () => {
  basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-turn-faults-")));
  await fs.chmod(basedir, 0o711); // the sandboxed backend's workspace uids pass through to their folders
  workspacesDir = path.join(basedir, "workspaces");
  env = {
    BERTH_REDIS_PREFIX: prefix,
    BERTH_WORKSPACE_BASEDIR: workspacesDir,
    MP_CONTROL_DIR: await makeControlDir(basedir),
    // A process counts as dead 2 s after its last beat (three beats per TTL).
    WORKERS_HEARTBEAT_TTL_MS: "2000",
    WORKERS_CONCURRENCY: "2",
    LOG_LEVEL: "silent",
  };
  fake = await startFakeModel({ apiKey: MODEL_KEY, respond: scriptedModel });
  tenant = await createTenantFixture(processApiRuntime(), "faults");
  redis = new Redis(loadRedisConfig().url);
  worker = startChild("worker-process.ts", env);
  children.push(worker);
  await worker.nextLine((line) => line === "ready");
  const setup = await startApi();
  const agent = await clientOf(setup.url).agent.create.mutate({
    name: `faults-${randomUUID().slice(0, 8)}`,
    modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: MODEL_KEY },
  });
  agentId = agent.id;
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") {
    for (const child of children)
      console.error(`--- child ${child.process.pid}:\n${child.stderr().slice(-3000)}`);
  }
});

afterAll(async () => {
  await stopChildren(children, false);
  for (const relay of relays) await relay.close();
  await fake?.close();
  redis?.disconnect();
  await closeProcessBerth();
  if (basedir) await fs.rm(basedir, { recursive: true, force: true });
});

describe("turn faults across processes", { timeout: 180_000 }, () => {
  it("Redis loses its data mid-turn: the other API process still refuses a second turn of the session", async () => {
    const [a, b] = [await startApi(), await startApi()];
    const { sessionId, workspaceId } = await newSession(clientOf(a.url));
    const first = clientOf(a.url).chat.run({ sessionId, message: "slow redis" });
    const workdir = await untilBashRan(workspaceId, "redis");

    expect(await wipeRedisPrefix(redis, prefix)).toBeGreaterThan(0);
    const second = await clientOf(b.url)
      .chat.run({ sessionId, message: "quick second" })
      .catch((error: unknown) => error);
    expect(second).toBeInstanceOf(TRPCClientError);
    expect((second as TRPCClientError<never>).data).toMatchObject({ code: "CONFLICT" });
    expect(modelRequestsFor("second", "user")).toBe(0);

    await release(workdir, "redis");
    expect(await first).toMatchObject({ status: "completed", text: "finished redis" });
    expect(await runsOf(workdir, "redis")).toBe(1);
    const session = await clientOf(b.url).session.get.query({ sessionId });
    expect(session.status).toBe("IDLE");
  });

  it("the API process running a turn dies: the client's resend reports the interruption, the turn never runs again, the dead process's leases go", async () => {
    const [a, b] = [await startApi(), await startApi()];
    // The balancer sends each new connection to the first replica that accepts: A, then B once A is gone.
    const balancer = await startRelay(() => [
      { host: "127.0.0.1", port: a.port },
      { host: "127.0.0.1", port: b.port },
    ]);
    relays.push(balancer);
    const client = clientOf(`http://127.0.0.1:${balancer.port}`);
    const { sessionId, workspaceId } = await newSession(client);
    const events: TChatTurnEvent["type"][] = [];
    const idempotencyKey = `send-${randomUUID()}`;
    const run = client.chat.run(
      { sessionId, message: "slow crash", idempotencyKey },
      { onEvent: (event) => events.push(event.type) },
    );
    const workdir = await untilBashRan(workspaceId, "crash");
    // A also holds a `call:` lease (a long file transfer, say) on the same workspace.
    a.child.process.stdin.write(`lease ${tenant.tenant.id} ${tenant.owner.id} ${workspaceId}\n`);
    await a.child.nextLine((line) => line === "leased");
    const holders = (await listWorkspaceLeases(tenant.ownerScope, workspaceId, processBerth().db)).map(
      (lease) => lease.holder,
    );
    expect(holders.some((holder) => holder.startsWith("turn:"))).toBe(true);
    expect(holders.some((holder) => holder.startsWith("call:"))).toBe(true);

    a.child.process.kill("SIGKILL");
    await a.child.exited;
    const result = await run;
    expect(result.status).toBe("interrupted");
    expect(result.error).toMatchObject({ code: "UNAVAILABLE", retryable: false });
    expect(events).toContain("tool-call");

    // The Bash side effect ran once; the model was asked for this turn once (no second run anywhere).
    await release(workdir, "crash");
    expect(await runsOf(workdir, "crash")).toBe(1);
    expect(modelRequestsFor("crash", "user")).toBe(1);
    // A resend with the same key, any time later, reports the same outcome and runs nothing.
    const again = await client.chat.run({ sessionId, message: "slow crash", idempotencyKey });
    expect(again.status).toBe("interrupted");
    expect(modelRequestsFor("crash", "user")).toBe(1);

    // The session shows the interruption, with what was stored: the user's message and the marker.
    const session = await client.session.get.query({ sessionId });
    expect(session.status).toBe("INTERRUPTED");
    const history = await client.chat.history.query({ sessionId });
    expect(history.map((message) => message.role)).toEqual(["user", "assistant"]);
    expect(history[0]!.content).toBe("slow crash");
    expect(JSON.stringify(history[1]!.content)).toContain(INTERRUPTED_MARKER.slice(0, 40));

    // The dead process's leases (its turn's and its call's) are released within a few heartbeat TTLs.
    await vi.waitFor(
      async () =>
        expect(await listWorkspaceLeases(tenant.ownerScope, workspaceId, processBerth().db)).toEqual([]),
      { timeout: 15_000, interval: 200 },
    );
    const released = await listWorkspaceEvents(
      tenant.ownerScope,
      workspaceId,
      { kinds: ["lease_released"] },
      processBerth().db,
    );
    expect(released.filter((event) => event.reason?.includes("no heartbeat")).length).toBeGreaterThanOrEqual(
      1,
    );

    // The session is free again at once.
    expect(await client.chat.run({ sessionId, message: "quick after" })).toMatchObject({
      status: "completed",
    });
  });

  it("a server that dies mid-stream is an error for the typed client, never a stream left open", async () => {
    const a = await startApi();
    const client = clientOf(a.url);
    const { sessionId, workspaceId } = await newSession(client);
    const stream = await client.chat.send.mutate({
      sessionId,
      message: "slow dies",
      idempotencyKey: `send-${randomUUID()}`,
    });
    // Settled into a value at once: the stream fails as soon as the connection drops.
    const drained = (async () => {
      for await (const event of stream) void event;
    })().then(
      () => "ended without an error",
      (error: unknown) => error,
    );
    const workdir = await untilBashRan(workspaceId, "dies");
    a.child.process.kill("SIGKILL");
    await a.child.exited;
    expect(await drained).toBeInstanceOf(Error);
    // chat.run: the resend finds no server either, and says the outcome is unknown (with the key to ask).
    const b = await startApi();
    const other = await newSession(clientOf(b.url));
    const run = clientOf(b.url).chat.run(
      { sessionId: other.sessionId, message: "slow dies2" },
      { resends: 1 },
    );
    await untilBashRan(other.workspaceId, "dies2");
    b.child.process.kill("SIGKILL");
    await expect(run).rejects.toThrow(/outcome is unknown: send again with idempotencyKey/);
    await release(workdir, "dies");
    await release(await workdirOf(other.workspaceId), "dies2");
  });

  it("a connection that goes silent (half-open): the client gives up on it and gets the turn's outcome, run once", async () => {
    const a = await startApi();
    const relay = await startRelay(() => [{ host: "127.0.0.1", port: a.port }]);
    relays.push(relay);
    const client = clientOf(`http://127.0.0.1:${relay.port}`);
    const { sessionId, workspaceId } = await newSession(client);
    const run = client.chat.run({ sessionId, message: "slow silent" }, { idleTimeoutMs: 20_000 });
    const workdir = await untilBashRan(workspaceId, "silent");
    relay.freeze(); // no error, no bytes: the stream would look "connected" forever
    await release(workdir, "silent"); // the turn ends on the server meanwhile
    const result = await run;
    expect(result).toMatchObject({ status: "completed", text: "finished silent" });
    expect(await runsOf(workdir, "silent")).toBe(1);
    expect(modelRequestsFor("silent", "user")).toBe(1);
  });

  it("the database goes away mid-turn: nothing internal reaches the client, and what ran is stored once it is back", async () => {
    // Whichever server the run uses: the machine's (a unix socket folder in `host`) or the embedded one
    // the global setup started (TCP, with a password).
    const database = new URL(process.env.DATABASE_URL!);
    const socketDir = database.searchParams.get("host");
    const upstream = socketDir
      ? { path: path.join(socketDir, `.s.PGSQL.${database.port || 5432}`) }
      : { host: database.hostname, port: Number(database.port || 5432) };
    const outage = await startRelay(() => [upstream]);
    relays.push(outage);
    const viaRelay = new URL(database);
    viaRelay.host = `127.0.0.1:${outage.port}`;
    viaRelay.searchParams.delete("host");
    const c = await startApi({ DATABASE_URL: viaRelay.toString() });
    const client = clientOf(c.url);
    const { sessionId, workspaceId } = await newSession(client);
    const events: TChatTurnEvent[] = [];
    const run = client.chat.run(
      { sessionId, message: "team outage" },
      { onEvent: (event) => events.push(event) },
    );
    const workdir = await untilBashRan(workspaceId, "outage");

    outage.cut();
    await release(workdir, "outage");
    // The turn goes on without the database: its next tool (AgentCreate) needs it and fails, the model
    // answers, and storing the turn's end fails too (the relay refuses its connections) ...
    await vi.waitFor(() => expect(modelRequestsFor("outage", "tool")).toBe(2), {
      timeout: 60_000,
      interval: 50,
    });
    const settled = run.then(
      () => "settled",
      () => "settled",
    );
    const refusedBefore = outage.refused();
    await Promise.race([
      settled, // (without retries the turn ends here, its end lost)
      vi.waitFor(() => expect(outage.refused()).toBeGreaterThan(refusedBefore), {
        timeout: 30_000,
        interval: 20,
      }),
    ]);
    // ... until the database is back: then it is stored, whole.
    outage.restore();
    const result = await run;
    expect(result).toMatchObject({ status: "completed", text: "finished outage", error: null });
    const failedTool = result.toolCalls.find((call) => call.toolName === "AgentCreate");
    expect(failedTool).toMatchObject({ isError: true });
    const history = await client.chat.history.query({ sessionId });
    expect(history.map((message) => message.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "tool",
      "assistant",
    ]);
    expect((await client.session.get.query({ sessionId })).status).toBe("IDLE");

    // A send while this replica has no database: a typed error, in words that quote nothing internal.
    outage.cut();
    const refused = await client.chat
      .run({ sessionId, message: "quick refused" })
      .catch((error: unknown) => error);
    outage.restore();
    expect(refused).toBeInstanceOf(TRPCClientError);
    const everything = JSON.stringify({
      events,
      message: (refused as Error).message,
      data: (refused as TRPCClientError<never>).data,
    });
    expect(everything).not.toMatch(
      /Prisma|invocation|database server|connection|127\.0\.0\.1|ECONNREFUSED|\.ts:\d/i,
    );
    expect(await runsOf(workdir, "outage")).toBe(1);
  });
});
