import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toRouteError } from "@/server/api/error-mapping";
import { getDb } from "@/server/db";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import { appendChatMessages } from "@/server/modules/session/session.data";
import { isConnectionError, toAppError } from "@/server/shared/errors";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { collect, startAgentApiHarness, type AgentApiHarness } from "../agent/support";
import { closeProcessBerth } from "@/server/composition/process-berth";

/**
 * Text Postgres cannot store (U+0000, unpaired UTF-16 surrogates) in what a turn produces: a binary tool
 * output, a Read of a binary file, the model's own text and tool input. Such a turn once failed at its
 * end with 22P05 on `chatMessage.createMany`, was retried as if the database were down and reported "the
 * database is unavailable", and its reply was lost. Now the turn completes, its messages are stored with
 * U+FFFD in place of those characters, and the model is told when its tool result was altered.
 * chat.send through the tRPC caller, real Postgres, Redis and local workspace; only the model is scripted.
 */
let h: AgentApiHarness;
let fake: FakeModelServer;
let agentId: string;

beforeAll(async () => {
  h = await startAgentApiHarness("unstorable");
  fake = await startFakeModel({ apiKey: "sk-unstorable" });
  const agent = await h.owner.agent.create({
    ...h.ref,
    name: "Binary",
    modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: "sk-unstorable" },
  });
  agentId = agent.id;
});

afterAll(async () => {
  await fake.close();
  await h.close();
  await closeProcessBerth();
});

const REPLACEMENT = "\uFFFD";

async function runTurn(message: string) {
  const sessionId = (await h.owner.session.create({ ...h.ref, agentId })).sessionId;
  const before = fake.requests.length;
  const events = await collect(await h.owner.chat.send({ ...h.ref, sessionId, message }));
  const history = await h.owner.chat.history({ ...h.ref, sessionId });
  const session = await h.owner.session.get({ ...h.ref, sessionId });
  const turn = await getDb().chatTurn.findFirstOrThrow({ where: { sessionId }, select: { status: true } });
  return { sessionId, events, history, session, turn, requests: fake.requests.slice(before) };
}

function expectCompletedAndStored(run: Awaited<ReturnType<typeof runTurn>>, reply: string) {
  expect(run.events.filter((event) => event.type === "error")).toEqual([]);
  expect(run.events.at(-1)).toMatchObject({ type: "done", status: "completed" });
  expect(run.turn.status).toBe("COMPLETED");
  expect(run.session.status).toBe("IDLE");
  const stored = JSON.stringify(run.history);
  expect(stored).toContain(reply);
  expect(stored).not.toContain("\\u0000");
  expect(stored).not.toMatch(/\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])/i);
}

/** What the model was sent as the result of `toolCallId` (the tool message of its next request). */
function toolResultSent(requests: typeof fake.requests, toolCallId: string): string {
  for (const request of requests) {
    const message = request.messages.find((m) => m.role === "tool" && m.tool_call_id === toolCallId);
    if (message) return String(message.content);
  }
  throw new Error(`the model was never sent the result of ${toolCallId}`);
}

const toolResultEvent = (events: TChatTurnEvent[], toolCallId: string) =>
  events.find(
    (event): event is Extract<TChatTurnEvent, { type: "tool-result" }> =>
      event.type === "tool-result" && event.toolCallId === toolCallId,
  );

describe("a turn whose text Postgres cannot store", () => {
  it("completes and is stored when a Bash output holds a NUL byte, and tells the model", async () => {
    fake.enqueue(
      {
        kind: "tool-calls",
        calls: [{ id: "c_nul", name: "Bash", arguments: { command: "printf 'a\\000b'" } }],
      },
      { kind: "text", text: "The output was binary." },
    );
    const run = await runTurn("print a NUL");

    expectCompletedAndStored(run, "The output was binary.");
    const sent = toolResultSent(run.requests, "c_nul");
    expect(sent).toContain(`a${REPLACEMENT}b`);
    expect(sent).toMatch(/1 NUL byte\(s\) replaced with U\+FFFD/);
    expect(toolResultEvent(run.events, "c_nul")?.output).toBe(sent);
    const toolMessage = run.history.find((message) => message.role === "tool");
    expect(JSON.stringify(toolMessage?.content)).toContain(`a${REPLACEMENT}b`);
  });

  it("completes and is stored after a Read of a binary file full of NULs, and tells the model", async () => {
    fake.enqueue(
      {
        kind: "tool-calls",
        calls: [
          {
            id: "c_make",
            name: "Bash",
            arguments: { command: "printf 'ELF\\000\\000\\001\\000DATA' > blob.bin" },
          },
        ],
      },
      {
        kind: "tool-calls",
        calls: [{ id: "c_read", name: "Read", arguments: { file_path: "workspace:///blob.bin" } }],
      },
      { kind: "text", text: "That file is binary." },
    );
    const run = await runTurn("read the binary");

    expectCompletedAndStored(run, "That file is binary.");
    const sent = toolResultSent(run.requests, "c_read");
    expect(sent).toContain(`ELF${REPLACEMENT}${REPLACEMENT}\u0001${REPLACEMENT}DATA`);
    expect(sent).toMatch(/3 NUL byte\(s\) replaced with U\+FFFD: output is binary or contains NUL/);
  });

  it("completes and is stored when the model's own text and tool input hold U+0000 and lone surrogates", async () => {
    fake.enqueue(
      {
        kind: "tool-calls",
        text: "Let me\u0000 look.",
        calls: [{ id: "c_echo", name: "Bash", arguments: { command: "echo 'half \uD800 pair'" } }],
      },
      { kind: "text", text: ["Here\u0000 it is: ", "\uDC00 and \uD83D", " done."] },
    );
    const run = await runTurn("say something odd");

    expectCompletedAndStored(run, `Here${REPLACEMENT} it is: ${REPLACEMENT} and ${REPLACEMENT} done.`);
    const stored = JSON.stringify(run.history);
    expect(stored).toContain(`Let me${REPLACEMENT} look.`);
    expect(stored).toContain(`half ${REPLACEMENT} pair`);
    // The next turn sends the stored (replaced) conversation back to the model.
    fake.enqueue({ kind: "text", text: "Still here." });
    const before = fake.requests.length;
    await collect(await h.owner.chat.send({ ...h.ref, sessionId: run.sessionId, message: "again" }));
    const resent = JSON.stringify(fake.requests[before]!.messages);
    expect(resent).toContain(`Here${REPLACEMENT} it is`);
    expect(resent).not.toContain("\\u0000");
  });
});

describe("a database error that is not a lost connection", () => {
  it("is never an outage: Postgres refusing NUL and lone surrogates (22P05, 22021) is INTERNAL, not 503", async () => {
    const sessionId = (await h.owner.session.create({ ...h.ref, agentId })).sessionId;
    const scope = h.tenant.ownerScope;
    // Below the turn's storage (which replaces these), straight into the tables: what Postgres answers.
    const refusals = await Promise.all([
      appendChatMessages(scope, sessionId, [{ role: "user", content: "a\u0000b" }], undefined, getDb()).catch(
        (e: unknown) => e,
      ),
      appendChatMessages(
        scope,
        sessionId,
        [{ role: "user", content: ["x\uD800"] }],
        undefined,
        getDb(),
      ).catch((e: unknown) => e),
      getDb()
        .chatTurn.create({
          data: { tenantId: scope.tenantId, sessionId, ownerId: "test", userMessage: "a\u0000b" },
        })
        .catch((e: unknown) => e),
    ]);
    for (const refusal of refusals) {
      expect(refusal).toBeInstanceOf(Error);
      expect(isConnectionError(refusal)).toBe(false);
      expect(toAppError(refusal).code).toBe("INTERNAL");
      expect(toRouteError(refusal).status).toBe(500);
    }
  });

  it("that fails a turn's end is reported at once as what it is, not as 'the database is unavailable'", async () => {
    // The session is deleted while its turn runs (as a purge would): storing the turn's end finds no session.
    let sessionId = "";
    const deleting = await startFakeModel({
      apiKey: "sk-deleting",
      respond: async () => {
        await getDb().session.delete({ where: { id: sessionId } });
        return { kind: "text", text: "Nobody will read this." };
      },
    });
    try {
      const agent = await h.owner.agent.create({
        ...h.ref,
        name: "Deleted",
        modelConfig: { baseUrl: deleting.baseUrl, model: "fake-model", apiKey: "sk-deleting" },
      });
      sessionId = (await h.owner.session.create({ ...h.ref, agentId: agent.id })).sessionId;
      const started = Date.now();
      const events = await collect(await h.owner.chat.send({ ...h.ref, sessionId, message: "hello?" }));
      const errors = events.filter((event) => event.type === "error");
      expect(errors).toEqual([
        expect.objectContaining({
          code: "NOT_FOUND",
          message: "The reply could not be saved: Session not found.",
        }),
      ]);
      expect(JSON.stringify(events)).not.toMatch(/unavailable/i);
      expect(events.at(-1)).toMatchObject({ type: "done", status: "failed" });
      // Not retried as an outage (the retries' backoff alone is 15 s).
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await deleting.close();
    }
  });
});
