import { afterEach, describe, expect, it } from "vitest";
import { runTurn } from "@/server/agent/agent-loop";
import type { TeamPort } from "@/server/agent/ports";
import { createTeamTools, inviteHandle } from "@/server/agent/team-tools";
import { AppError } from "@/server/shared/errors";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { RecordingOffloader, deferred, modelFor } from "./support";

type Call = { method: string; input: Record<string, unknown> };

function recordingTeam(overrides: Partial<TeamPort> = {}): TeamPort & { calls: Call[] } {
  const calls: Call[] = [];
  return {
    calls,
    createWorkerSession: (input) => {
      calls.push({ method: "createWorkerSession", input });
      return Promise.resolve({ sessionId: "worker-session", agentId: "worker-agent" });
    },
    inviteAgent: (input) => {
      calls.push({ method: "inviteAgent", input });
      return Promise.resolve({ sessionId: "borrowed-session", workspaceId: "ws-of-invited" });
    },
    runSubTurn: (input) => {
      calls.push({ method: "runSubTurn", input });
      return Promise.resolve({ text: `done: ${input.prompt}` });
    },
    ...overrides,
  };
}

const invitable = [{ id: "9f3c1a20-aaaa-bbbb", name: "Monday", description: "Knows the calendar" }];

describe("team tools", () => {
  it("AgentCreate makes a worker session on the leader's workspace id and returns its answer", async () => {
    const team = recordingTeam();
    const [agentCreate] = createTeamTools({ team, leaderSessionId: "lead", leaderWorkspaceId: "ws-lead" });
    const controller = new AbortController();
    const result = await agentCreate!.execute(
      { name: "researcher", description: "Finds facts", prompt: "Find X" },
      { signal: controller.signal },
    );

    expect(result.isError).toBe(false);
    expect(result.content).toContain("done: Find X");
    expect(team.calls).toEqual([
      {
        method: "createWorkerSession",
        input: {
          leaderSessionId: "lead",
          workspaceId: "ws-lead",
          name: "researcher",
          description: "Finds facts",
        },
      },
      {
        method: "runSubTurn",
        input: { sessionId: "worker-session", prompt: "Find X", signal: controller.signal },
      },
    ]);
  });

  it("AgentCreate rejects bad input and reports domain errors as tool errors", async () => {
    const team = recordingTeam({
      createWorkerSession: () =>
        Promise.reject(
          new AppError("CONFLICT", "dup", { userMessage: "A member named researcher already exists" }),
        ),
    });
    const [agentCreate] = createTeamTools({ team, leaderSessionId: "lead", leaderWorkspaceId: "ws-lead" });
    expect(await agentCreate!.execute({ name: "a@b", description: "d", prompt: "p" }, {})).toMatchObject({
      isError: true,
    });
    expect(await agentCreate!.execute({ name: "researcher", description: "d", prompt: "p" }, {})).toEqual({
      content: "Error: A member named researcher already exists",
      isError: true,
    });
  });

  it("AgentInvite is offered only with invitable agents, and borrows by handle", async () => {
    const team = recordingTeam();
    expect(
      createTeamTools({ team, leaderSessionId: "lead", leaderWorkspaceId: "ws" }).map((t) => t.name),
    ).toEqual(["AgentCreate"]);
    const tools = createTeamTools({
      team,
      leaderSessionId: "lead",
      leaderWorkspaceId: "ws",
      invitableAgents: invitable,
    });
    const invite = tools.find((tool) => tool.name === "AgentInvite")!;
    expect(inviteHandle(invitable[0]!)).toBe("Monday@9f3c1a20");
    expect(invite.inputSchema).toMatchObject({ properties: { target: { enum: ["Monday@9f3c1a20"] } } });

    const result = await invite.execute({ target: "Monday@9f3c1a20", prompt: "When is the meeting?" }, {});
    expect(result.isError).toBe(false);
    expect(result.metadata).toEqual({
      memberSessionId: "borrowed-session",
      memberWorkspaceId: "ws-of-invited",
    });
    expect(team.calls[0]).toEqual({
      method: "inviteAgent",
      input: { leaderSessionId: "lead", agentId: "9f3c1a20-aaaa-bbbb" },
    });
    expect((await invite.execute({ target: "Nobody@00000000", prompt: "x" }, {})).isError).toBe(true);
  });

  it("cancelling the leader cancels the member's sub-turn (the error propagates)", async () => {
    const started = deferred();
    const team = recordingTeam({
      runSubTurn: ({ signal }) =>
        new Promise((_resolve, reject) => {
          signal?.addEventListener("abort", () => reject(new Error("sub-turn cancelled")));
          started.resolve();
        }),
    });
    const [agentCreate] = createTeamTools({ team, leaderSessionId: "lead", leaderWorkspaceId: "ws" });
    const controller = new AbortController();
    const running = agentCreate!.execute(
      { name: "w", description: "d", prompt: "p" },
      { signal: controller.signal },
    );
    await started.promise;
    controller.abort();
    await expect(running).rejects.toThrow("sub-turn cancelled");
  });
});

describe("a leader turn that creates a worker", () => {
  let fake: FakeModelServer;
  afterEach(async () => fake.close());

  it("runs the worker's turn on the same model endpoint and feeds its answer to the leader", async () => {
    fake = await startFakeModel();
    fake.enqueue(
      {
        kind: "tool-calls",
        calls: [
          {
            id: "call_team",
            name: "AgentCreate",
            arguments: { name: "w1", description: "helper", prompt: "Say hi" },
          },
        ],
      },
      { kind: "text", text: "hi from the worker" }, // the worker's turn
      { kind: "text", text: "The worker said hi." }, // the leader again
    );
    const agentModel = modelFor(fake);
    const offloader = new RecordingOffloader();
    const team = recordingTeam({
      runSubTurn: async ({ sessionId, prompt, signal }) => {
        const worker = await runTurn({
          sessionId,
          model: agentModel.model,
          system: "You are w1.",
          history: [],
          userMessage: prompt,
          tools: [],
          offloader,
          limits: { maxRetries: 0 },
          ...(signal ? { signal } : {}),
        });
        return {
          text: worker.newMessages.length > 1 ? JSON.stringify(worker.newMessages.at(-1)!.content) : "",
        };
      },
    });
    const result = await runTurn({
      sessionId: "lead",
      model: agentModel.model,
      system: "You lead.",
      history: [],
      userMessage: "get a worker to say hi",
      tools: createTeamTools({ team, leaderSessionId: "lead", leaderWorkspaceId: "ws-lead" }),
      offloader,
      limits: { maxRetries: 0 },
    });

    expect(result.status).toBe("completed");
    expect(fake.requests).toHaveLength(3);
    expect(fake.requests[1]!.messages).toEqual([
      { role: "system", content: "You are w1." },
      { role: "user", content: "Say hi" },
    ]);
    const toolMessage = fake.requests[2]!.messages.at(-1)!;
    expect(toolMessage).toMatchObject({ role: "tool", tool_call_id: "call_team" });
    expect(String(toolMessage.content)).toContain("hi from the worker");
  });
});
