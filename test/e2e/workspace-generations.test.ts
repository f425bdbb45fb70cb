/**
 * Issue 9 D end to end, through `npm start`'s composition (scripts/start.ts, workers in-process, local
 * workspaces) with a real Chromium as the tenant admin, the typed client (API key) driving chat turns and
 * the loopback fake model answering them:
 * - purging a session's workspace leaves the session usable: the dialog says so, and the next turn runs in
 *   generation 2 of the workspace, which is empty;
 * - an MCP server (from npm) added in the dashboard for the agent's scope, chosen by the agent's name, is
 *   offered to and called in a chat turn of a session that never added it.
 * Needs /usr/bin/chromium: a missing browser FAILS under CI=1 and skips (with the reason printed) elsewhere.
 */
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAuth } from "@/server/auth/auth";
import { createBerthClient, type BerthClient } from "@/server/client/create-berth-client";
import { getDb } from "@/server/db";
import { apiKeySecret, createApiKey } from "@/server/modules/api-key/api-key.service";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import type { BerthServer } from "./support/berth-server";
import { sendChatTurn } from "./support/chat-turn";
import { HAS_CHROMIUM, requireChromium } from "./support/chromium";
import { type E2eApp, startE2eApp, submitSignIn, watchedPage } from "./support/e2e-app";
import type { SeededTenant } from "./support/seed";
import { processBerth } from "@/server/composition/process-berth";

requireChromium();

const EVERYTHING_ENTRY = path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const MODEL_KEY = "sk-e2e-generations";
const AGENT_NAME = "e2e-generations";

describe.skipIf(!HAS_CHROMIUM)("workspace generations and the agent's MCP scope, end to end", () => {
  let app: BerthServer;
  let browser: Browser;
  let tenant: SeededTenant;
  let e2e: E2eApp;
  let client: BerthClient;
  let fake: FakeModelServer;
  let page: Page;
  let pageErrors: string[];
  let agentId: string;
  let firstSession: { sessionId: string; workspaceId: string };

  beforeAll(async () => {
    e2e = await startE2eApp();
    ({ app, browser, tenant } = e2e);
    fake = await startFakeModel({ apiKey: MODEL_KEY });
    const auth = createAuth({
      secret: process.env.BERTH_AUTH_SECRET!,
      baseUrl: e2e.baseUrl,
      prisma: getDb(),
      log: () => {},
    });
    const { plainKey } = await createApiKey(
      auth,
      tenant.scope,
      { name: "e2e generations", role: "admin" },
      apiKeySecret(processBerth().config),
      processBerth().db,
    );
    client = createBerthClient({ url: e2e.baseUrl, apiKey: plainKey });
    const agent = await client.agent.create.mutate({
      tenantId: tenant.scope.tenantId,
      name: AGENT_NAME,
      modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: MODEL_KEY },
    });
    agentId = agent.id;
    firstSession = await client.session.create.mutate({
      tenantId: tenant.scope.tenantId,
      agentId,
      name: "first",
    });
    ({ page, pageErrors } = await watchedPage(await browser.newContext()));
    await page.goto(`${app.url}/sign-in`);
    await submitSignIn(page, tenant.email, tenant.password);
    await page.waitForURL(new RegExp(`/t/${tenant.slug}$`));
  });

  afterAll(async () => {
    await fake?.close();
    await e2e?.close();
  });

  const turn = (sessionId: string, message: string) =>
    sendChatTurn(client, { tenantId: tenant.scope.tenantId, sessionId, message });
  const bashTurn = async (sessionId: string, command: string) => {
    fake.enqueue(
      { kind: "tool-calls", calls: [{ id: `c-${Date.now()}`, name: "Bash", arguments: { command } }] },
      { kind: "text", text: "ran it" },
    );
    const events = await turn(sessionId, "run it");
    expect(events.at(-1)).toMatchObject({ type: "done", status: "completed" });
    const result = events.find((event) => event.type === "tool-result") as {
      output: string;
      isError: boolean;
    };
    expect(result.isError).toBe(false);
    return result.output;
  };
  const summary = () => page.getByTestId("workspace-summary");
  const stateIs = (state: string) =>
    summary()
      .getByTestId("workspace-state")
      .filter({ hasText: new RegExp(`^${state}$`) })
      .waitFor();

  it("purge → the same session's next turn runs in generation 2, fresh and empty", async () => {
    expect(await bashTurn(firstSession.sessionId, "echo generation-one > old.txt && echo wrote")).toContain(
      "wrote",
    );

    await page.goto(`${app.url}/t/${tenant.slug}/workspaces/${firstSession.workspaceId}`);
    await stateIs("ready");
    expect(await page.getByTestId("workspace-generation").textContent()).toBe("1");
    // The tabs' own calls hold short leases while they load; purge once the page is idle, unforced.
    await page.getByRole("tab", { name: "Files" }).click();
    await page.getByTestId("file-row").filter({ hasText: "old.txt" }).waitFor();
    await page.getByRole("tab", { name: "Overview" }).click();
    await page.getByText("No leases: nothing is using this workspace", { exact: false }).waitFor();
    await page.getByRole("button", { name: "Purge…" }).click();
    const purgeForm = page.getByRole("form", { name: "Confirm purge" });
    const explanation = await purgeForm.getByTestId("purge-explanation").textContent();
    expect(explanation).toContain("Its sessions keep working");
    expect(explanation).toContain("generation 2, fresh and empty");
    await purgeForm.getByLabel("Workspace id").fill(firstSession.workspaceId);
    await purgeForm.getByRole("button", { name: "Purge generation 1" }).click();
    // The outcome, or the refusal with its reason (so a failure says why instead of timing out).
    const outcome = page.getByTestId("action-result").or(page.getByTestId("action-error"));
    await outcome.waitFor();
    expect(await outcome.textContent()).toContain("next use starts generation 2");
    await stateIs("purged");
    await page.getByTestId("action-result").filter({ hasText: "Generation 1 purged" }).waitFor();
    await page.getByTestId("purged-note").filter({ hasText: "generation 2" }).waitFor();
    await page.getByRole("tab", { name: "Receipts" }).click();
    await page.getByTestId("purge-receipt").waitFor();
    await page.getByRole("tab", { name: "Overview" }).click();

    // The next use: a chat turn of the same session works, in an empty workspace.
    const listing = await bashTurn(
      firstSession.sessionId,
      "ls -A; test ! -e old.txt && echo FRESH-WORKSPACE",
    );
    expect(listing).toContain("FRESH-WORKSPACE");
    expect(listing).not.toContain("old.txt");
    expect(await getWorkspace(tenant.scope, firstSession.workspaceId, processBerth().db)).toMatchObject({
      state: "READY",
      generation: 2,
    });

    await page.reload();
    await stateIs("ready");
    expect(await page.getByTestId("workspace-generation").textContent()).toBe("2");
    await page.getByRole("tab", { name: "Events" }).click();
    await page.getByTestId("event-row").filter({ hasText: "generation 2 after a purge" }).first().waitFor();
    expect(pageErrors).toEqual([]);
  });

  it("an MCP added for the agent (chosen by name) is offered and called in a chat of a session that did not add it", async () => {
    await page.goto(`${app.url}/t/${tenant.slug}/workspaces/${firstSession.workspaceId}`);
    await stateIs("ready");
    await page.getByRole("tab", { name: "MCP servers" }).click();
    const scope = page.getByRole("group", { name: "MCP scope" });
    await scope.getByLabel("Agent", { exact: true }).selectOption({ label: AGENT_NAME });
    await scope.getByLabel("Session", { exact: true }).selectOption({ label: "All sessions of the agent" });
    await page
      .getByTestId("mcp-scope-note")
      .filter({ hasText: `every session of ${AGENT_NAME}` })
      .waitFor();
    const addForm = page.getByRole("form", { name: "Add an MCP server" });
    await addForm.getByLabel("Name", { exact: true }).fill("teamkit");
    await addForm.getByLabel("Command", { exact: true }).fill(process.execPath);
    await addForm.getByLabel(/Arguments/).fill(`${EVERYTHING_ENTRY}\nstdio`);
    await addForm.getByRole("button", { name: "Add" }).click();
    await page.getByTestId("mcps-message").filter({ hasText: "Added teamkit" }).waitFor();
    const row = page.getByTestId("mcp-row").filter({ hasText: "teamkit" });
    await row
      .getByTestId("mcp-state")
      .filter({ hasText: /^running$/ })
      .waitFor();
    await row.getByTestId("mcp-tools").filter({ hasText: "echo" }).waitFor();

    // A new session of the agent, which never declared any MCP.
    const second = await client.session.create.mutate({
      tenantId: tenant.scope.tenantId,
      agentId,
      name: "second",
    });
    expect(second.workspaceId).toBe(firstSession.workspaceId);
    const before = fake.requests.length;
    fake.enqueue(
      {
        kind: "tool-calls",
        calls: [
          { id: "c-mcp", name: "mcp__teamkit__echo", arguments: { message: "hello from the agent scope" } },
        ],
      },
      { kind: "text", text: "echoed" },
    );
    const events = await turn(second.sessionId, "echo through the team kit");
    expect(events.at(-1)).toMatchObject({ type: "done", status: "completed" });
    expect(fake.requests[before]!.tools.map((tool) => tool.function.name)).toContain("mcp__teamkit__echo");
    const result = events.find((event) => event.type === "tool-result") as {
      toolName: string;
      output: string;
    };
    expect(result.toolName).toBe("mcp__teamkit__echo");
    expect(result.output).toContain("hello from the agent scope");

    // The session's own scope, chosen by its name, declares nothing: the MCP is the agent's.
    await page.reload();
    await scope.getByLabel("Agent", { exact: true }).selectOption({ label: AGENT_NAME });
    await scope.getByLabel("Session", { exact: true }).selectOption(second.sessionId);
    await page.getByText("No MCP servers in this scope").waitFor();
    expect(pageErrors).toEqual([]);
  });
});
