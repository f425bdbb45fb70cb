/**
 * Re-attaching to a running turn across web replicas: two API processes over real HTTP
 * (chat-http-process.ts), one worker process, real Postgres and Redis, the loopback fake model. A turn is
 * started through replica A and its request is aborted mid-reply (a reload, a closed tab): the turn runs
 * to its end anyway, and `chat.attach` through replica B replays what it said so far from the stored
 * event log, then follows it live to its `done`.
 */
import { randomBytes, randomUUID } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createBerthClient, type BerthClient } from "@/server/client";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { createTenantFixture, type TenantFixture } from "../api/support/tenant-fixtures";
import { makeControlDir, startChild, stopChildren, type Child } from "./processes";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processApiRuntime } from "@/server/api/composition";

const MODEL_KEY = "sk-chat-attach";

let basedir: string;
let env: Record<string, string>;
let fake: FakeModelServer;
let tenant: TenantFixture;
let agentId: string;
const children: Child[] = [];

async function startApi(): Promise<string> {
  const child = startChild("chat-http-process.ts", env);
  children.push(child);
  return (await child.nextLine((line) => line.startsWith("ready "))).slice("ready ".length);
}

function clientOf(url: string): BerthClient {
  return createBerthClient({ url, apiKey: tenant.adminKey.plainKey });
}

/** A promise the test resolves when it wants the held model reply to go on. */
function gate(): { until: Promise<void>; open: () => void } {
  let open!: () => void;
  const until = new Promise<void>((resolve) => (open = resolve));
  return { until, open };
}

beforeAll(async () => {
  basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-chat-attach-")));
  await fs.chmod(basedir, 0o711); // the sandboxed backend's workspace uids pass through to their folders
  env = {
    BERTH_REDIS_PREFIX: `${process.env.BERTH_REDIS_PREFIX}-attach-${randomBytes(3).toString("hex")}`,
    BERTH_WORKSPACE_BASEDIR: path.join(basedir, "workspaces"),
    MP_CONTROL_DIR: await makeControlDir(basedir),
    WORKERS_CONCURRENCY: "2",
    LOG_LEVEL: "silent",
  };
  fake = await startFakeModel({ apiKey: MODEL_KEY });
  tenant = await createTenantFixture(processApiRuntime(), "attach");
  const worker = startChild("worker-process.ts", env);
  children.push(worker);
  await worker.nextLine((line) => line === "ready");
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") {
    for (const child of children)
      console.error(`--- child ${child.process.pid}:\n${child.stderr().slice(-3000)}`);
  }
});

afterAll(async () => {
  await stopChildren(children, false);
  await fake?.close();
  await closeProcessBerth();
  if (basedir) await fs.rm(basedir, { recursive: true, force: true });
});

describe("re-attaching to a turn across replicas", { timeout: 120_000 }, () => {
  it("a turn whose request went away runs to its end; another replica replays it, then follows it live", async () => {
    const [a, b] = [await startApi(), await startApi()];
    agentId = (
      await clientOf(a).agent.create.mutate({
        name: `attach-${randomUUID().slice(0, 8)}`,
        modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: MODEL_KEY },
      })
    ).id;
    const { sessionId } = await clientOf(a).session.create.mutate({ agentId });
    const held = gate();
    fake.enqueue({ kind: "held", before: ["Hello ", "from "], until: held.until, after: ["the ", "end."] });

    // Through A, as a tab would, then the tab goes away mid-reply.
    const controller = new AbortController();
    const sent = await clientOf(a).chat.send.mutate(
      { sessionId, message: "say hello slowly" },
      { signal: controller.signal },
    );
    const iterator = sent[Symbol.asyncIterator]();
    expect(await iterator.next()).toMatchObject({ value: { type: "text-delta", text: "Hello " } });
    controller.abort(); // the connection closes (what was already buffered may still be read)

    // Through B: what the turn said so far, from its log, then live once the model goes on.
    const attached: Array<{ turnId: string; seq: number; event: TChatTurnEvent }> = [];
    let text = "";
    for await (const entry of await clientOf(b).chat.attach.query({ sessionId })) {
      attached.push(entry);
      if (entry.event.type === "text-delta") text += entry.event.text;
      if (text === "Hello from ") held.open(); // everything before the hold was replayed
    }
    expect(text).toBe("Hello from the end.");
    expect(attached.at(-1)?.event).toMatchObject({ type: "done", status: "completed" });
    const seqs = attached.filter((entry) => entry.event.type !== "keepalive").map((entry) => entry.seq);
    expect(seqs).toEqual(seqs.map((_, index) => index + 1));

    // Stored as a normal, completed turn: the request going away cancelled nothing.
    const history = await clientOf(b).chat.history.query({ sessionId });
    expect(JSON.stringify(history.at(-1)?.content)).toContain("Hello from the end.");
    expect((await clientOf(b).session.get.query({ sessionId })).status).toBe("IDLE");
    const turns = await clientOf(b).chat.turns.query({ sessionId });
    expect(turns.map((turn) => turn.status)).toEqual(["COMPLETED"]);

    // A turn that ended replays from any sequence number, through either replica.
    const tail: TChatTurnEvent[] = [];
    const turnId = attached[0]!.turnId;
    for await (const entry of await clientOf(a).chat.attach.query({ sessionId, turnId, fromSeq: 3 }))
      tail.push(entry.event);
    expect(tail.map((event) => event.type)).toEqual(["text-delta", "text-delta", "done"]);
  });
});
