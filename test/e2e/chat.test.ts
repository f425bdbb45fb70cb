/**
 * The core loop in the browser: the seeded admin creates an agent pointed at the fake model, starts a
 * session from the Sessions page, and chats. The turn streams live (a tool call with its input and result,
 * text deltas, the workspace provisioned on the way); a long turn is cancelled; a turn the provider rejects
 * shows why, in words; a completed turn shows its token usage; a viewer reads the chat but cannot send.
 * Real server (scripts/start.ts, workers in-process), real Postgres/Redis, Debian Chromium, and the fake
 * OpenAI-compatible model of test/fixtures/fake-model. Screenshots go to test-results/screenshots/.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createAuth } from "@/server/auth/auth";
import { getDb } from "@/server/db";
import { getAgentByName } from "@/server/modules/agent/agent.data";
import { addMember } from "@/server/modules/member/member.data";
import { getSession, listChatMessages } from "@/server/modules/session/session.data";
import { createTenantWithOwner } from "@/server/modules/tenant/tenant.service";
import { type FakeModelServer, startFakeModel } from "@/test/fixtures/fake-model/server";
import type { BerthServer } from "./support/berth-server";
import { HAS_CHROMIUM, requireChromium } from "./support/chromium";
import { type E2eApp, startE2eApp, submitSignIn, watchedPage } from "./support/e2e-app";
import { printScreenshotListing, screenshotter } from "./support/screenshots";
import type { SeededTenant } from "./support/seed";
import { processBerth } from "@/server/composition/process-berth";

requireChromium();

const AGENT_NAME = "e2e-chatter";
const MODEL_KEY = "sk-fake-model-key";
const shot = screenshotter("chat");

/** A promise the test resolves when a held model reply may go on. */
function gate(): { until: Promise<void>; open: () => void } {
  let open!: () => void;
  const until = new Promise<void>((resolve) => (open = resolve));
  return { until, open };
}

describe.skipIf(!HAS_CHROMIUM)("sessions and chat, end to end", () => {
  let app: BerthServer;
  let browser: Browser;
  let tenant: SeededTenant;
  let e2e: E2eApp;
  let model: FakeModelServer;
  let page: Page;
  let pageErrors: string[];
  let sessionPath: string;

  beforeAll(async () => {
    model = await startFakeModel({ apiKey: MODEL_KEY });
    e2e = await startE2eApp();
    ({ app, browser, tenant } = e2e);
    ({ page, pageErrors } = await watchedPage(
      await browser.newContext({ viewport: { width: 1366, height: 900 } }),
    ));
  });

  afterAll(async () => {
    await e2e?.close();
    await model?.close();
    printScreenshotListing("chat");
  });

  const send = async (text: string) => {
    const box = page.getByRole("form", { name: "Send a message" }).getByLabel("Message");
    await box.fill(text);
    await box.press("Enter");
  };

  it("signs in and creates an agent that talks to the model endpoint", async () => {
    await page.goto(`${app.url}/sign-in`);
    await shot(page, "sign-in");
    await submitSignIn(page, tenant.email, tenant.password);
    await page.waitForURL(new RegExp(`/t/${tenant.slug}$`));
    await page.getByTestId("count-agents").locator(".stat-value").filter({ hasText: "2" }).waitFor();
    await shot(page, "overview");

    await page.getByRole("navigation", { name: "Tenant" }).getByRole("link", { name: "Agents" }).click();
    await page.waitForURL(/\/agents$/);
    const form = page.getByRole("form", { name: "Create agent" });
    await form.getByLabel("Name").fill(AGENT_NAME);
    await form.getByLabel("Model").fill("fake-model");
    await form.getByLabel("Description").fill("Chats in the e2e test");
    await form.getByLabel("Base URL").fill(model.baseUrl);
    await form.getByLabel("API key").fill(MODEL_KEY);
    await form.getByLabel("Isolation").selectOption("PER_SESSION");
    await form.getByRole("button", { name: "Create agent" }).click();
    await page.getByTestId("agent-row").filter({ hasText: AGENT_NAME }).waitFor();
    await page
      .locator("[data-sonner-toast]")
      .filter({ hasText: `Agent ${AGENT_NAME} created.` })
      .waitFor();
    await shot(page, "agents");
    expect(await getAgentByName(tenant.scope, AGENT_NAME, processBerth().db)).toMatchObject({
      modelConfig: { baseUrl: model.baseUrl },
    });
  });

  it("creates a session from the Sessions page and lands in its chat", async () => {
    await page.getByRole("navigation", { name: "Tenant" }).getByRole("link", { name: "Sessions" }).click();
    await page.waitForURL(/\/sessions$/);
    await page.getByRole("button", { name: "New session" }).first().click();
    const dialog = page.getByRole("form", { name: "New session" });
    await dialog.getByLabel("Agent").selectOption({ label: AGENT_NAME });
    await dialog.getByLabel("Session name").fill("first chat");
    await shot(page, "new-session-dialog");
    await dialog.getByRole("button", { name: "Create session" }).click();
    await page.waitForURL(/\/sessions\/[^/]+$/);
    sessionPath = new URL(page.url()).pathname;
    await page.getByRole("heading", { level: 1, name: "first chat" }).waitFor();
    await page.getByText("No messages yet").waitFor();
    await shot(page, "empty-chat");
  });

  it("streams a turn live: the tool call with its input and result, then text, until cancelled", async () => {
    // The model calls Glob, then streams two deltas and holds the response open: a long turn.
    model.enqueue(
      { kind: "tool-calls", calls: [{ id: "call_glob", name: "Glob", arguments: { pattern: "**/*.md" } }] },
      { kind: "stall", text: ["Looking at ", "the files"] },
    );
    await send("List the markdown files, please.");
    const live = page.getByTestId("live-turn");
    await live.getByTestId("turn-streaming").waitFor();
    const call = live.getByTestId("tool-call").filter({ hasText: "Glob" });
    await call.waitFor();
    expect(await call.getByTestId("tool-input").textContent()).toContain('"pattern": "**/*.md"');
    // The result arrives on the same card (the workspace was provisioned for the tool to run).
    await call.getByTestId("tool-result").waitFor();
    await live.getByTestId("live-text").filter({ hasText: "Looking at the files" }).waitFor();
    await shot(page, "streaming-turn");
    const sessionId = sessionPath.split("/").at(-1)!;
    expect((await getSession(tenant.scope, sessionId, processBerth().db)).status).toBe("RUNNING");

    await page.getByRole("button", { name: "Cancel turn" }).click();
    await page.getByTestId("turn-cancelled").waitFor();
    await shot(page, "cancelled-turn");
    await vi.waitFor(async () =>
      expect((await getSession(tenant.scope, sessionId, processBerth().db)).status).not.toBe("RUNNING"),
    );
    // What was said before the cancel is kept: the user's message and the tool call are in the history.
    const stored = await listChatMessages(tenant.scope, sessionId, {}, processBerth().db);
    expect(stored[0]?.role).toBe("user");
    await page.getByTestId("chat-message").getByTestId("tool-call").filter({ hasText: "Glob" }).waitFor();
  });

  it("completes a turn and shows its token usage", async () => {
    model.enqueue({
      kind: "text",
      text: "There are no markdown files yet.",
      usage: { promptTokens: 1200, completionTokens: 34 },
    });
    await send("And now?");
    await page.getByTestId("chat-message").filter({ hasText: "There are no markdown files yet." }).waitFor();
    const usage = page.getByTestId("last-turn").getByTestId("turn-usage");
    await usage.waitFor();
    expect(await usage.textContent()).toContain("1,234 tokens");
    await shot(page, "completed-turn");
  });

  it("shows why a turn failed, in words", async () => {
    model.enqueue({
      kind: "http-error",
      status: 401,
      message: "Incorrect API key provided",
      code: "invalid_api_key",
    });
    await send("Try once more.");
    const error = page.getByTestId("turn-error");
    await error.waitFor();
    expect(await error.textContent()).toContain("rejected the agent's API key (HTTP 401)");
    await page.getByTestId("session-status").filter({ hasText: "error" }).waitFor();
    await shot(page, "failed-turn");
    expect(pageErrors).toEqual([]);
  });

  it("still shows why the turn failed after a reload, on the turn itself", async () => {
    await page.reload();
    const marker = page.getByTestId("turn-marker").filter({ has: page.getByTestId("turn-marker-reason") });
    await marker.last().waitFor();
    expect(await marker.last().getAttribute("data-status")).toBe("failed");
    expect(await marker.last().textContent()).toContain("rejected the agent's API key (HTTP 401)");
    // The cancelled turn of earlier is marked too: its partial reply does not read like a finished one.
    await page.locator('[data-testid="turn-marker"][data-status="cancelled"]').waitFor();
    await shot(page, "failed-turn-after-reload");
  });

  it("a reload during a streaming turn re-attaches: the turn runs to its end and the page streams it", async () => {
    const held = gate();
    model.enqueue({
      kind: "held",
      before: ["Streaming ", "slowly "],
      until: held.until,
      after: ["and ", "done."],
    });
    await send("Tell me something slowly.");
    await page.getByTestId("live-text").filter({ hasText: "Streaming slowly" }).waitFor();
    await page.reload();
    // The reloaded page replays the running turn from its stored events and follows it.
    const live = page.getByTestId("live-turn");
    await live.getByTestId("turn-streaming").waitFor();
    await live.getByTestId("live-text").filter({ hasText: "Streaming slowly" }).waitFor();
    await page.getByTestId("live-user-message").filter({ hasText: "Tell me something slowly." }).waitFor();
    held.open();
    await page.getByTestId("chat-message").filter({ hasText: "Streaming slowly and done." }).waitFor();
    const sessionId = sessionPath.split("/").at(-1)!;
    await vi.waitFor(async () =>
      expect((await getSession(tenant.scope, sessionId, processBerth().db)).status).toBe("IDLE"),
    );
    await shot(page, "reattached-turn");
  });

  it("a second tab sees a turn sent from the first, and keeps its own draft while that turn runs", async () => {
    const second = await watchedPage(page.context());
    await second.page.goto(`${app.url}${sessionPath}`);
    await second.page.getByTestId("chat-log").waitFor();
    await second.page.getByTestId("chat-message").first().waitFor();
    const held = gate();
    model.enqueue({
      kind: "held",
      before: ["From ", "the first tab "],
      until: held.until,
      after: ["is here."],
    });
    await send("Sent from the first tab.");
    await second.page
      .getByTestId("live-user-message")
      .filter({ hasText: "Sent from the first tab." })
      .waitFor();
    await second.page.getByTestId("live-text").filter({ hasText: "From the first tab" }).waitFor();
    // Sending there now is refused, saying why, and the draft stays.
    const box = second.page.getByRole("form", { name: "Send a message" }).getByLabel("Message");
    await box.fill("My draft in the second tab");
    await box.press("Enter");
    await second.page.getByTestId("send-refused").filter({ hasText: "already in progress" }).waitFor();
    expect(await box.inputValue()).toBe("My draft in the second tab");
    await shot(second.page, "second-tab");
    held.open();
    await second.page
      .getByTestId("chat-message")
      .filter({ hasText: "From the first tab is here." })
      .waitFor();
    await page.getByTestId("chat-message").filter({ hasText: "From the first tab is here." }).waitFor();
    expect(await box.inputValue()).toBe("My draft in the second tab");
    expect(second.pageErrors).toEqual([]);
    await second.page.close();
  });

  it("refuses a message over the limit before sending, keeps the draft, and shows a long message in full", async () => {
    const box = page.getByRole("form", { name: "Send a message" }).getByLabel("Message");
    const tooLong = "y".repeat(200_001);
    await box.fill(tooLong);
    await box.press("Enter");
    const refused = page.getByTestId("send-refused");
    await refused.filter({ hasText: "200,000 characters" }).waitFor();
    expect((await box.inputValue()).length).toBe(200_001);

    model.enqueue({ kind: "text", text: "Read it all." });
    const long = `${"z".repeat(99_991)}-the-end.`; // 100,000 characters
    await box.fill(long);
    await box.press("Enter");
    await page.getByTestId("chat-message").filter({ hasText: "Read it all." }).waitFor();
    expect(await box.inputValue()).toBe("");
    const message = page.getByTestId("chat-message").filter({ hasText: "zzzz" }).last();
    await message.getByRole("button", { name: "Show all 100,000 characters" }).click();
    const shown = await message.getByTestId("message-text").textContent();
    expect(shown).toContain(long);
  });

  it("lets a viewer read the chat but not send or delete", async () => {
    const auth = createAuth({
      secret: process.env.BERTH_AUTH_SECRET!,
      baseUrl: app.url,
      prisma: getDb(),
      log: () => {},
    });
    const suffix = tenant.slug.slice("e2e-".length);
    const viewer = { email: `chat-viewer-${suffix}@example.test`, password: `pw-chat-viewer-${suffix}` };
    const { owner } = await createTenantWithOwner(
      auth,
      {
        tenantName: `Chat viewer ${suffix}`,
        slug: `e2e-chat-viewer-${suffix}`,
        name: "Chat Viewer",
        ...viewer,
      },
      processBerth().db,
    );
    await addMember(tenant.scope, { userId: owner.id, role: "viewer" }, processBerth().db);
    // A phone-sized screen, to see the shell fold into its menu.
    const watched = await watchedPage(await browser.newContext({ viewport: { width: 390, height: 844 } }));
    await watched.page.goto(`${app.url}/sign-in?next=${encodeURIComponent(sessionPath)}`);
    await submitSignIn(watched.page, viewer.email, viewer.password);
    await watched.page.waitForURL(new RegExp(`${sessionPath}$`));
    await watched.page
      .getByTestId("chat-message")
      .filter({ hasText: "There are no markdown files yet." })
      .waitFor();
    await watched.page.getByTestId("chat-read-only").waitFor();
    expect(await watched.page.getByRole("form", { name: "Send a message" }).count()).toBe(0);
    expect(await watched.page.getByRole("button", { name: "Delete session" }).count()).toBe(0);
    await shot(watched.page, "viewer-phone");
    await watched.page.getByRole("button", { name: "Open navigation" }).click();
    await watched.page.getByRole("dialog").getByRole("link", { name: "Sessions" }).waitFor();
    await shot(watched.page, "viewer-phone-menu");
    expect(watched.pageErrors).toEqual([]);
    await watched.page.context().close();
  });

  it("shows a not-found page inside the shell for an unknown page, and at the root for an unknown tenant", async () => {
    const missing = await page.goto(`${app.url}/t/${tenant.slug}/no-such-page`);
    expect(missing?.status()).toBe(404);
    await page.getByTestId("not-found").waitFor();
    await page.getByTestId("tenant-name").waitFor(); // the shell is there
    await shot(page, "not-found-in-shell");
    const unknownTenant = await page.goto(`${app.url}/t/no-such-tenant-anywhere`);
    expect(unknownTenant?.status()).toBe(404);
    await page.getByTestId("not-found").waitFor();
    expect(pageErrors).toEqual([]);
  });
});
