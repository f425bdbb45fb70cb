/**
 * Environment variables in the dashboard, end to end: an agent's, typed as NAME / value rows in its create
 * form and editor (refused names stay on the page with their reason, never saved), and a session's, edited on
 * its page; a viewer sees both read-only. Real server (as `npm start` runs it), Postgres, Redis and Chromium;
 * what was stored is read from the database.
 */
import type { Locator, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getDb } from "@/server/db";
import { getAgentByName } from "@/server/modules/agent/agent.data";
import { getSessionOrNull } from "@/server/modules/session/session.data";
import { HAS_CHROMIUM, requireChromium } from "./support/chromium";
import { type E2eApp, startE2eApp } from "./support/e2e-app";
import { screenshotter } from "./support/screenshots";
import { signedInPages, type User } from "./support/signed-in";
import { addTenantUser } from "./support/tenant-users";

requireChromium();

const AGENT_NAME = "env-agent";
const shot = screenshotter("env-vars");

/** Two clicks in the same task, before React can re-render the button disabled: a double click at its fastest. */
const clickTwiceAtOnce = (button: Locator) =>
  button.evaluate((element: HTMLElement) => {
    element.click();
    element.click();
  });

/** How many tRPC requests to `procedure` the page sends from now on. */
function countCalls(page: Page, procedure: string): () => number {
  let sent = 0;
  page.on("request", (request) => {
    if (request.url().includes("/api/trpc/") && request.url().includes(procedure)) sent++;
  });
  return () => sent;
}

const toast = (page: Page, text: string) => page.locator("[data-sonner-toast]").filter({ hasText: text });

describe.skipIf(!HAS_CHROMIUM)("environment variables of agents and sessions", () => {
  let e2e: E2eApp;
  let open: ReturnType<typeof signedInPages>;
  let admin: User;
  let viewer: User;
  let agentId = "";
  let sessionId = "";

  beforeAll(async () => {
    e2e = await startE2eApp();
    const { tenant, app, browser } = e2e;
    admin = { email: tenant.email, password: tenant.password };
    open = signedInPages(app, browser, tenant.slug);
    viewer = await addTenantUser(e2e, "viewer");
    const seeded = await getDb().session.findFirstOrThrow({
      where: { tenantId: tenant.scope.tenantId, name: "s0" },
    });
    sessionId = seeded.id;
  });

  afterAll(async () => {
    await e2e?.close();
  });

  const storedAgentEnv = async () => (await getAgentByName(e2e.tenant.scope, AGENT_NAME, getDb()))?.env;

  it("creates an agent with variables, refuses bad names next to their row, and saves a removal", async () => {
    const { page, pageErrors } = await open("/agents", admin);
    const form = page.getByRole("form", { name: "Create agent" });
    await form.getByLabel("Name", { exact: true }).fill(AGENT_NAME);
    await form.getByLabel("Model").fill("test-model");
    const env = form.getByTestId("agent-env");
    expect(await env.textContent()).toContain("not for secrets");
    await env.getByRole("button", { name: "Add variable" }).click();
    await env.getByLabel("Name of variable 1").fill("MODE");
    await env.getByLabel("Value of variable 1").fill("fast");
    await env.getByRole("button", { name: "Add variable" }).click();
    await env.getByLabel("Name of variable 2").fill("GREETING");
    await env.getByLabel("Value of variable 2").fill("hello world");
    await form.getByRole("button", { name: "Create agent" }).click();
    const row = page.getByTestId("agent-row").filter({ hasText: AGENT_NAME });
    await row.waitFor();
    expect(await storedAgentEnv()).toEqual({ MODE: "fast", GREETING: "hello world" });
    // The create form starts empty again.
    expect(await env.getByTestId("env-row").count()).toBe(0);

    await row.getByRole("link", { name: AGENT_NAME }).click();
    await page.waitForURL(/\/agents\/[^/]+$/);
    agentId = page.url().split("/").at(-1)!;
    // From the server, not from the client's cache: in name order.
    await page.reload();
    const edit = page.getByRole("form", { name: "Edit agent" });
    const rows = edit.getByTestId("env-row");
    await rows.first().waitFor();
    expect(await rows.count()).toBe(2);
    expect(await edit.getByLabel("Name of variable 1").inputValue()).toBe("GREETING");
    expect(await edit.getByLabel("Value of variable 1").inputValue()).toBe("hello world");
    expect(await edit.getByLabel("Name of variable 2").inputValue()).toBe("MODE");

    // Each refused name says why next to its row, and nothing is sent.
    const updates = countCalls(page, "agent.update");
    await edit.getByRole("button", { name: "Add variable" }).click();
    const third = edit.getByLabel("Name of variable 3");
    const error = rows.nth(2).getByTestId("env-row-error");
    await third.fill("PATH");
    expect(await error.textContent()).toContain("this variable is the workspace's own");
    await third.fill("1X");
    expect(await error.textContent()).toContain("not starting with a digit");
    await third.fill("GREETING");
    expect(await error.textContent()).toBe("GREETING: already set in a row above");
    await shot(page, "agent-refused-row");
    await edit.getByRole("button", { name: "Save changes" }).click();
    await toast(page, "Fix the environment variables first.").waitFor();
    expect(updates()).toBe(0);
    expect(await storedAgentEnv()).toEqual({ MODE: "fast", GREETING: "hello world" });

    // Removing the bad row and MODE, then a double click on save: one update, which drops MODE.
    await rows.nth(2).getByRole("button", { name: "Remove GREETING" }).click();
    await edit.getByRole("button", { name: "Remove MODE" }).click();
    expect(await rows.count()).toBe(1);
    await clickTwiceAtOnce(edit.getByRole("button", { name: "Save changes" }));
    await toast(page, "Saved.").waitFor();
    expect(updates()).toBe(1);
    expect(await storedAgentEnv()).toEqual({ GREETING: "hello world" });
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("sets a session's variables on its page, kept after a reload", async () => {
    const { page, pageErrors } = await open(`/sessions/${sessionId}`, admin);
    const section = page.getByTestId("session-env");
    await section.getByText("No variables.").waitFor();
    await section.getByRole("button", { name: "Edit variables" }).click();
    await section.getByRole("button", { name: "Add variable" }).click();
    await section.getByLabel("Name of variable 1").fill("STAGE");
    await section.getByLabel("Value of variable 1").fill("review");
    await section.getByRole("button", { name: "Save variables" }).click();
    await toast(page, "Variables saved.").waitFor();
    expect((await getSessionOrNull(e2e.tenant.scope, sessionId, getDb()))?.env).toEqual({ STAGE: "review" });

    await page.reload();
    const variable = section.getByTestId("env-variable");
    await variable.waitFor();
    expect(await variable.textContent()).toBe("STAGE= review");
    await shot(page, "session-variables");

    // The same page renames the session (session.update), a double click saving once.
    const renames = countCalls(page, "session.update");
    await page.getByRole("button", { name: "Rename session" }).click();
    const form = page.getByRole("form", { name: "Rename session" });
    await form.getByLabel("Name").fill("  reviewed  ");
    await form.getByRole("button", { name: "Save" }).dblclick();
    await page.getByRole("heading", { name: "reviewed", exact: true }).waitFor();
    expect(renames()).toBe(1);
    expect(await getSessionOrNull(e2e.tenant.scope, sessionId, getDb())).toMatchObject({
      name: "reviewed",
      env: { STAGE: "review" },
    });
    expect(pageErrors).toEqual([]);
    await page.close();
  });

  it("shows a viewer the variables read-only", async () => {
    const { page, pageErrors } = await open(`/sessions/${sessionId}`, viewer);
    const section = page.getByTestId("session-env");
    await section.getByTestId("env-variable").waitFor();
    expect(await section.getByTestId("env-variable").textContent()).toBe("STAGE= review");
    expect(await section.getByRole("button").count()).toBe(0);
    expect(await page.getByRole("button", { name: "Rename session" }).count()).toBe(0);

    await page.goto(`${e2e.app.url}/t/${e2e.tenant.slug}/agents/${agentId}`);
    const agentEnv = page.getByTestId("agent-env");
    await agentEnv.getByTestId("env-variable").waitFor();
    expect(await agentEnv.getByTestId("env-variable").allTextContents()).toEqual(["GREETING= hello world"]);
    expect(await agentEnv.getByRole("textbox").count()).toBe(0);
    expect(await agentEnv.getByRole("button").count()).toBe(0);
    expect(pageErrors).toEqual([]);
    await page.close();
  });
});
