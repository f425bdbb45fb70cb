/**
 * The Agents and Sessions pages, end to end: `npm start`'s entry (scripts/start.ts, building Next when the
 * sources changed) against the test Postgres/Redis, driven by a real Chromium as the seeded tenant admin.
 * Provider keys go in through the forms and are checked in the database through the agent data layer; they
 * must never reach the page. Sessions are created through the API (the session service) and their history
 * through the chat data layer. Needs /usr/bin/chromium: a missing browser FAILS under CI=1 and skips (with
 * the reason printed) elsewhere.
 */
import { randomBytes } from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createAuth } from "@/server/auth/auth";
import { secretKeyFromBytes, type SecretKey } from "@/server/auth/secrets";
import { createBerthClient, type BerthClient } from "@/server/client/create-berth-client";
import { loadSecretsConfig } from "@/server/config/secrets";
import { getDb } from "@/server/db";
import { getAgentByName, getAgentModelApiKey, getAgentOrNull } from "@/server/modules/agent/agent.data";
import { apiKeySecret, createApiKey } from "@/server/modules/api-key/api-key.service";
import { appendChatMessages, getSessionOrNull } from "@/server/modules/session/session.data";
import type { BerthServer } from "./support/berth-server";
import { HAS_CHROMIUM, requireChromium } from "./support/chromium";
import { type E2eApp, startE2eApp } from "./support/e2e-app";
import type { SeededTenant } from "./support/seed";
import { signedInPages } from "./support/signed-in";
import { processBerth } from "@/server/composition/process-berth";

requireChromium();

const AGENT_NAME = "e2e-writer";
// Distinctive, so finding it anywhere in the page HTML means it leaked.
const FIRST_KEY = `sk-e2e-first-${randomBytes(12).toString("hex")}`;
const SECOND_KEY = `sk-e2e-second-${randomBytes(12).toString("hex")}`;

describe.skipIf(!HAS_CHROMIUM)("agents and sessions pages, end to end", () => {
  let app: BerthServer;
  let browser: Browser;
  let tenant: SeededTenant;
  let client: BerthClient;
  let e2e: E2eApp;
  // The key the server encrypts with (the global setup's BERTH_ENCRYPTION_KEY, passed on to the app).
  let secretKey: SecretKey;
  let open: ReturnType<typeof signedInPages>;

  beforeAll(async () => {
    e2e = await startE2eApp();
    ({ app, browser, tenant } = e2e);
    secretKey = secretKeyFromBytes(loadSecretsConfig(process.env).encryptionKey);
    const auth = createAuth({
      secret: process.env.BERTH_AUTH_SECRET!,
      baseUrl: e2e.baseUrl,
      prisma: getDb(),
      log: () => {},
    });
    const { plainKey } = await createApiKey(
      auth,
      tenant.scope,
      { name: "e2e sessions", role: "admin" },
      apiKeySecret(processBerth().config),
      processBerth().db,
    );
    client = createBerthClient({ url: e2e.baseUrl, apiKey: plainKey });
    open = signedInPages(app, browser, tenant.slug);
  });

  afterAll(async () => {
    await e2e?.close();
  });

  /**
   * A new page of the admin's browser context, signed in by the first call (these tests are about the
   * pages, not the sign-in: dashboard.test.ts signs in); uncaught page errors (hydration mismatches
   * included) fail the test.
   */
  const signedInPage = () => open("", tenant);

  /** Confirms the open confirmation dialog with `button` and returns what it said. */
  async function confirmInDialog(page: Page, button: string): Promise<string> {
    const dialog = page.getByTestId("confirm-dialog");
    await dialog.waitFor();
    const text = (await dialog.textContent()) ?? "";
    await dialog.getByRole("button", { name: button }).click();
    await dialog.waitFor({ state: "detached" });
    return text;
  }

  async function expectNoKeyInPage(page: Page) {
    const html = await page.content();
    expect(html).not.toContain(FIRST_KEY);
    expect(html).not.toContain(SECOND_KEY);
  }

  async function writerAgent() {
    const agent = await getAgentByName(tenant.scope, AGENT_NAME, processBerth().db);
    if (!agent) throw new Error(`agent ${AGENT_NAME} not found`);
    return agent;
  }

  it("creates an agent with a key, edits its model and replaces then clears the key, never showing it", async () => {
    const { page, pageErrors } = await signedInPage();
    await page.getByRole("navigation", { name: "Tenant" }).getByRole("link", { name: "Agents" }).click();
    await page.waitForURL(new RegExp(`/t/${tenant.slug}/agents$`));
    expect(
      await page
        .getByRole("navigation", { name: "Tenant" })
        .getByRole("link", { name: "Agents" })
        .getAttribute("aria-current"),
    ).toBe("page");
    // The seeded agents are listed.
    await page.getByTestId("agent-row").filter({ hasText: "researcher" }).waitFor();

    // The server's validation message lands next to the form, and what was typed stays.
    const form = page.getByRole("form", { name: "Create agent" });
    await form.getByLabel("Name").fill("bad/name");
    await form.getByLabel("Model").fill("model-a");
    await form.getByRole("button", { name: "Create agent" }).click();
    const invalid = form.locator("xpath=..").getByRole("alert");
    await invalid.waitFor();
    expect(await invalid.textContent()).toContain("letters, digits, spaces, dots, dashes and underscores");
    expect(await form.getByLabel("Model").inputValue()).toBe("model-a");

    await form.getByLabel("Name").fill(AGENT_NAME);
    await form.getByLabel("Description").fill("Writes things");
    await form.getByLabel("API key").fill(FIRST_KEY);
    await form.getByLabel("Isolation").selectOption("PER_SESSION");
    await form.getByRole("button", { name: "Create agent" }).click();
    const row = page.getByTestId("agent-row").filter({ hasText: AGENT_NAME });
    await row.waitFor();
    expect(await row.getByTestId("key-state").textContent()).toBe("key set");
    expect(await row.getByTestId("agent-model").textContent()).toBe("model-a");
    expect(await row.textContent()).toContain("one workspace per session");
    expect(await form.getByLabel("API key").inputValue()).toBe("");
    await expectNoKeyInPage(page);
    const created = await writerAgent();
    expect(await getAgentModelApiKey(tenant.scope, created.id, secretKey, processBerth().db)).toBe(FIRST_KEY);

    // Edit the model only: the rest, the key included, stays as stored.
    await row.getByRole("link", { name: AGENT_NAME }).click();
    await page.waitForURL(new RegExp(`/t/${tenant.slug}/agents/${created.id}$`));
    const edit = page.getByRole("form", { name: "Edit agent" });
    await edit.getByLabel("Model").fill("model-b");
    await edit.getByRole("button", { name: "Save changes" }).click();
    await page.locator("[data-sonner-toast]").filter({ hasText: "Saved." }).waitFor();
    await expectNoKeyInPage(page);
    const edited = await writerAgent();
    expect(edited.modelConfig).toMatchObject({ provider: "openai-compatible", model: "model-b" });
    expect(edited).toMatchObject({ description: "Writes things", isolationPolicy: "PER_SESSION" });
    expect(await getAgentModelApiKey(tenant.scope, created.id, secretKey, processBerth().db)).toBe(FIRST_KEY);

    await page.getByRole("link", { name: "← Agents" }).click();
    await page.waitForURL(new RegExp(`/t/${tenant.slug}/agents$`));
    await vi.waitFor(async () => expect(await row.getByTestId("agent-model").textContent()).toBe("model-b"));
    expect(await row.getByTestId("key-state").textContent()).toBe("key set");

    // Replace, then clear the key.
    await row.getByRole("link", { name: AGENT_NAME }).click();
    await page.waitForURL(new RegExp(`/agents/${created.id}$`));
    const replace = page.getByRole("form", { name: "Replace API key" });
    await replace.getByLabel("New key").fill(SECOND_KEY);
    await replace.getByRole("button", { name: "Replace key" }).click();
    await page.locator("[data-sonner-toast]").filter({ hasText: "Key replaced." }).waitFor();
    expect(await getAgentModelApiKey(tenant.scope, created.id, secretKey, processBerth().db)).toBe(
      SECOND_KEY,
    );
    await expectNoKeyInPage(page);

    await page.getByRole("button", { name: "Clear key" }).click();
    expect(await confirmInDialog(page, "Clear key")).toContain(AGENT_NAME);
    await page.locator("[data-sonner-toast]").filter({ hasText: "Key cleared." }).waitFor();
    expect(await page.getByTestId("key-state").textContent()).toBe("no key");
    expect(await getAgentModelApiKey(tenant.scope, created.id, secretKey, processBerth().db)).toBeNull();
    expect((await writerAgent()).modelConfig.model).toBe("model-b");
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("lists a session with its workspace link and history, filters by agent, and deletes it", async () => {
    const agent = await writerAgent();
    // Through the API, i.e. the session service: it picks the workspace id from the isolation policy.
    const { sessionId, workspaceId } = await client.session.create.mutate({
      agentId: agent.id,
      name: "e2e-chat",
    });
    await appendChatMessages(
      tenant.scope,
      sessionId,
      [
        { role: "user", content: [{ type: "text", text: "Count the files, please." }] },
        {
          role: "assistant",
          content: [
            { type: "text", text: "Let me look." },
            { type: "tool-call", toolCallId: "call-1", toolName: "Glob", input: { pattern: "**/*.md" } },
          ],
        },
        {
          role: "tool",
          content: [
            {
              type: "tool-result",
              toolCallId: "call-1",
              toolName: "Glob",
              output: { type: "text", value: "README.md\nNOTES.md" },
            },
          ],
        },
        { role: "assistant", content: [{ type: "text", text: "There are 2 markdown files." }] },
      ],
      undefined,
      processBerth().db,
    );

    const { page, pageErrors } = await signedInPage();
    await page.getByRole("navigation", { name: "Tenant" }).getByRole("link", { name: "Sessions" }).click();
    await page.waitForURL(new RegExp(`/t/${tenant.slug}/sessions$`));
    const row = page.getByTestId("session-row").filter({ hasText: "e2e-chat" });
    await row.waitFor();
    expect(await page.getByTestId("session-row").count()).toBe(4); // the 3 seeded ones and this one
    expect(await row.textContent()).toContain(AGENT_NAME);

    // Filtered by the agent (kept in the URL): only its session.
    await page.getByLabel("Filter by agent").selectOption({ label: AGENT_NAME });
    await page.waitForURL(new RegExp(`/sessions\\?agent=${agent.id}$`));
    await vi.waitFor(async () => expect(await page.getByTestId("session-row").count()).toBe(1));
    await row.waitFor();

    const workspaceLink = row.getByTestId("workspace-link");
    const workspacePath = `/t/${tenant.slug}/workspaces/${encodeURIComponent(workspaceId)}`;
    expect(await workspaceLink.getAttribute("href")).toBe(workspacePath);
    await workspaceLink.click();
    await page.waitForURL(`${app.url}${workspacePath}`);
    await page.getByRole("heading", { level: 1, name: workspaceId }).waitFor();
    await page.goBack();

    await row.getByRole("link", { name: "e2e-chat" }).click();
    await page.waitForURL(new RegExp(`/sessions/${sessionId}$`));
    const messages = page.getByTestId("chat-message");
    await vi.waitFor(async () => expect(await messages.count()).toBe(4));
    expect(await messages.nth(0).textContent()).toContain("Count the files, please.");
    const call = messages.nth(1).getByTestId("tool-call");
    expect(await call.textContent()).toContain("Glob");
    expect(await call.textContent()).toContain('"pattern": "**/*.md"');
    expect(await messages.nth(2).getByTestId("tool-result").textContent()).toContain("README.md\nNOTES.md");
    expect(await messages.nth(3).textContent()).toContain("There are 2 markdown files.");
    expect(await page.getByTestId("workspace-link").getAttribute("href")).toBe(workspacePath);

    await page.getByRole("button", { name: "Delete session" }).click();
    expect(await confirmInDialog(page, "Delete session")).toContain("chat history");
    await page.waitForURL(new RegExp(`/t/${tenant.slug}/sessions$`));
    await page.getByTestId("session-row").first().waitFor();
    await vi.waitFor(async () => expect(await page.getByTestId("session-row").count()).toBe(3));
    expect(await page.getByTestId("session-row").filter({ hasText: "e2e-chat" }).count()).toBe(0);
    expect(await getSessionOrNull(tenant.scope, sessionId, processBerth().db)).toBeNull();
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("deletes an agent from the list, its sessions with it", async () => {
    const agent = await writerAgent();
    const { sessionId } = await client.session.create.mutate({ agentId: agent.id, name: "goes-too" });

    const { page, pageErrors } = await signedInPage();
    await page.goto(`${app.url}/t/${tenant.slug}/agents`);
    const row = page.getByTestId("agent-row").filter({ hasText: AGENT_NAME });
    await row.waitFor();
    await row.getByRole("button", { name: "Delete" }).click();
    expect(await confirmInDialog(page, "Delete agent")).toContain("Every session of this agent is deleted");
    await vi.waitFor(async () => expect(await row.count()).toBe(0));
    expect(await page.getByTestId("agent-row").count()).toBe(2); // the seeded ones stay
    expect(await getAgentOrNull(tenant.scope, agent.id, processBerth().db)).toBeNull();
    expect(await getSessionOrNull(tenant.scope, sessionId, processBerth().db)).toBeNull();
    expect(pageErrors).toEqual([]);
    await page.close();
  });
});
