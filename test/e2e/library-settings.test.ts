/**
 * The Library and Settings pages, end to end, with the agent form that uses them: the seeded admin (the
 * tenant's owner) adds an HTTP MCP server and uploads a skill folder to the library, creates an agent with a
 * system prompt whose defaults come from the library, sees the library say which agents use each entry,
 * equips another agent in one click, then sets the tenant's idle TTL on Settings (a value above the
 * installation's is refused in words). Real server (scripts/start.ts, workers in-process), real
 * Postgres/Redis, Debian Chromium; what the pages did is checked in the database through the data layers.
 * Screenshots go to test-results/screenshots/.
 */
import { cliOperatorActor } from "@/server/modules/operator/operator-actor";
import { setTenantQuotaOverrides } from "@/server/modules/operator/tenant-quota.service";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { getDb } from "@/server/db";
import { getAgentByName } from "@/server/modules/agent/agent.data";
import { changeBudget } from "@/server/modules/quota/quota-admin.service";
import { getTenantPolicy } from "@/server/modules/tenant/tenant-policy.data";
import type { BerthServer } from "./support/berth-server";
import { HAS_CHROMIUM, requireChromium } from "./support/chromium";
import { type E2eApp, startE2eApp, submitSignIn, watchedPage } from "./support/e2e-app";
import { printScreenshotListing, screenshotter } from "./support/screenshots";
import type { SeededTenant } from "./support/seed";
import { processBerth } from "@/server/composition/process-berth";

requireChromium();

const AGENT_NAME = "e2e-librarian";
const SYSTEM_PROMPT = "You are the tenant's librarian.\nAnswer with sources.";
const SKILL_DIR = path.resolve("test/fixtures/skills/hello-skill");
const shot = screenshotter("library");
// The installation's idle TTL, as the server reads it (the same environment): the most a tenant may set.
const INSTALLATION_TTL_MS = Number(process.env.BERTH_WORKSPACE_IDLE_TTL_MS ?? 3_600_000);

describe.skipIf(!HAS_CHROMIUM)("library, agent defaults and settings, end to end", () => {
  let app: BerthServer;
  let browser: Browser;
  let tenant: SeededTenant;
  let e2e: E2eApp;
  let page: Page;
  let pageErrors: string[];

  beforeAll(async () => {
    e2e = await startE2eApp();
    ({ app, browser, tenant } = e2e);
    ({ page, pageErrors } = await watchedPage(
      await browser.newContext({ viewport: { width: 1366, height: 900 } }),
    ));
    await page.goto(`${app.url}/sign-in`);
    await submitSignIn(page, tenant.email, tenant.password);
    await page.waitForURL(new RegExp(`/t/${tenant.slug}$`));
  });

  afterAll(async () => {
    await e2e?.close();
    printScreenshotListing("library");
  });

  const nav = (label: string) =>
    page.getByRole("navigation", { name: "Tenant" }).getByRole("link", { name: label }).click();
  const toast = (text: string) => page.locator("[data-sonner-toast]").filter({ hasText: text }).waitFor();
  const libraryRow = (name: string) => page.getByTestId("library-row").filter({ hasText: name });

  it("adds an MCP server and uploads a skill folder to the library", async () => {
    await nav("Library");
    await page.waitForURL(new RegExp(`/t/${tenant.slug}/library$`));
    await page.getByTestId("empty-state").waitFor();
    await shot(page, "library-empty");

    await page.getByRole("button", { name: "Add MCP server" }).click();
    const dialog = page.getByRole("form", { name: "MCP server" });
    // The form checks the declaration with the API's schema before sending it.
    await dialog.getByLabel("Identifier").fill("docs search");
    await dialog.getByLabel("Description").fill("Searches the product docs (vetted by the platform team)");
    await dialog.getByLabel("Transport").selectOption("http_mcp");
    await dialog.getByLabel("URL").fill("https://mcp.example.test/mcp");
    await dialog.getByRole("button", { name: "Add to library" }).click();
    expect(await dialog.getByRole("alert").textContent()).toContain(
      "Identifier: MCP names may contain only letters, digits",
    );
    await dialog.getByLabel("Identifier").fill("docs-search");
    await dialog.getByLabel("Headers").fill("Authorization: Bearer e2e-token");
    await shot(page, "library-add-mcp");
    await dialog.getByRole("button", { name: "Add to library" }).click();
    await toast("docs-search added to the library.");
    await dialog.waitFor({ state: "detached" });
    await libraryRow("docs-search").waitFor();

    await page.getByRole("button", { name: "Upload skill" }).click();
    const upload = page.getByRole("form", { name: "Upload skill" });
    await upload.getByLabel("Folder").setInputFiles(SKILL_DIR);
    await upload.getByRole("button", { name: "Upload" }).click();
    await toast("Skill hello added to the library.");
    await upload.waitFor({ state: "detached" });
    const skillRow = libraryRow("hello");
    await skillRow.waitFor();
    expect(await skillRow.textContent()).toContain("SKILL.md + 1 file");
    expect(await libraryRow("docs-search").textContent()).toContain("https://mcp.example.test/mcp");
    await shot(page, "library-entries");
  });

  it("creates an agent with a system prompt, a default MCP server from the library and a default skill", async () => {
    await nav("Agents");
    await page.waitForURL(/\/agents$/);
    const form = page.getByRole("form", { name: "Create agent" });
    await form.getByLabel("Name").fill(AGENT_NAME);
    await form.getByLabel("Model").fill("model-lib");
    await form.getByLabel("Description").fill("Finds things in the docs");
    await form.getByLabel("System prompt").fill(SYSTEM_PROMPT);
    await form.getByLabel("Library MCP server").selectOption({ label: "docs-search" });
    await form.getByRole("button", { name: "Add MCP server from the library" }).click();
    await form.getByLabel("Library skill").selectOption({ label: "hello — Says hello to the user" });
    await form.getByRole("button", { name: "Add skill from the library" }).click();
    const defaults = form.getByTestId("agent-defaults");
    await vi.waitFor(async () => expect(await defaults.getByTestId("default-item").count()).toBe(2));
    expect(await defaults.textContent()).toContain("https://mcp.example.test/mcp");
    await shot(page, "agent-create-with-defaults");
    await form.getByRole("button", { name: "Create agent" }).click();
    await toast(`Agent ${AGENT_NAME} created.`);
    await page.getByTestId("agent-row").filter({ hasText: AGENT_NAME }).waitFor();
    // The form starts empty again, defaults included.
    expect(await defaults.getByTestId("default-item").count()).toBe(0);

    const agent = await getAgentByName(tenant.scope, AGENT_NAME, processBerth().db);
    expect(agent).toMatchObject({ systemPrompt: SYSTEM_PROMPT, description: "Finds things in the docs" });
    expect(agent?.defaultMcpConfigs).toMatchObject([
      {
        name: "docs-search",
        mcp_config: {
          type: "http_mcp",
          url: "https://mcp.example.test/mcp",
          headers: { Authorization: "Bearer e2e-token" },
        },
      },
    ]);
    expect(agent?.defaultSkills).toMatchObject([
      { kind: "inline", name: "hello", files: [{ path: "scripts/hello.sh" }] },
    ]);

    // The editor shows the same fields, filled from the stored agent.
    await page
      .getByTestId("agent-row")
      .filter({ hasText: AGENT_NAME })
      .getByRole("link", { name: AGENT_NAME })
      .click();
    await page.waitForURL(new RegExp(`/agents/${agent!.id}$`));
    const edit = page.getByRole("form", { name: "Edit agent" });
    expect(await edit.getByLabel("System prompt").inputValue()).toBe(SYSTEM_PROMPT);
    await vi.waitFor(async () => expect(await edit.getByTestId("default-item").count()).toBe(2));
    expect(await edit.getByTestId("agent-defaults").textContent()).toContain("library");
    await shot(page, "agent-editor");
  });

  it("shows which agents use each entry and equips another agent in one click", async () => {
    await nav("Library");
    await page.waitForURL(/\/library$/);
    await vi.waitFor(async () =>
      expect(await libraryRow("docs-search").getByTestId("used-by").textContent()).toContain(AGENT_NAME),
    );
    expect(await libraryRow("hello").getByTestId("used-by").textContent()).toContain(AGENT_NAME);

    await libraryRow("hello").getByRole("button", { name: "Equip an agent with hello" }).click();
    const equip = page.getByRole("form", { name: "Equip with hello" });
    await equip.getByLabel("Agent").selectOption({ label: "researcher" });
    await equip.getByRole("button", { name: "Equip" }).click();
    await toast("hello added to the defaults of researcher.");
    await equip.waitFor({ state: "detached" });
    await vi.waitFor(async () =>
      expect(await libraryRow("hello").getByTestId("used-by").textContent()).toContain("researcher"),
    );
    expect(
      (await getAgentByName(tenant.scope, "researcher", processBerth().db))?.defaultSkills,
    ).toMatchObject([{ name: "hello" }]);
    await shot(page, "library-used-by");
  });

  it("sets the tenant's idle TTL on Settings, within what the installation allows", async () => {
    await nav("Settings");
    await page.waitForURL(/\/settings$/);
    const form = page.getByRole("form", { name: "Tenant settings" });
    const effective = page.getByTestId("settings-effective");
    await effective.waitFor();
    expect(await effective.textContent()).toContain(`${INSTALLATION_TTL_MS / 60_000} min (installation's)`);
    await vi.waitFor(async () =>
      expect(await page.getByTestId("settings-backend").textContent()).toContain("local"),
    );
    await shot(page, "settings");

    await form.getByLabel("Idle TTL (minutes)").fill(String(INSTALLATION_TTL_MS / 60_000 + 1));
    // The browser's own max check is bypassed so the server's bound answers in words.
    await form.evaluate((element) => ((element as HTMLFormElement).noValidate = true));
    await form.getByRole("button", { name: "Save settings" }).click();
    const refused = form.locator("xpath=..").getByRole("alert");
    await refused.waitFor();
    expect(await refused.textContent()).toContain("Idle TTL");
    expect(await refused.textContent()).toContain(`at most ${INSTALLATION_TTL_MS} ms`);

    await form.getByLabel("Idle TTL (minutes)").fill("30"); // below any installation TTL of an hour or more
    await form.getByLabel("Default isolation").selectOption("PER_SESSION");
    await form.getByRole("button", { name: "Save settings" }).click();
    await toast("Settings saved.");
    await vi.waitFor(async () => expect(await effective.textContent()).toContain("30 min"));
    expect(await effective.textContent()).toContain("one workspace per session");
    expect(await getTenantPolicy(tenant.scope, processBerth().db)).toMatchObject({
      workspaceIdleTtlMs: 1_800_000,
      defaultIsolationPolicy: "PER_SESSION",
    });
    await shot(page, "settings-saved");

    // The tenant's default backend, among what the installation runs (here: local only), and back.
    const backendCard = page.getByTestId("settings-backend");
    const storedDefault = async () =>
      (await getDb().tenant.findUnique({ where: { id: tenant.scope.tenantId } }))?.defaultBackend;
    await backendCard.getByLabel("Tenant default backend").selectOption("local");
    await vi.waitFor(async () => expect(await storedDefault()).toBe("local"));
    await toast("Default backend saved.");
    await backendCard.getByLabel("Tenant default backend").selectOption("");
    await vi.waitFor(async () => expect(await storedDefault()).toBeNull());

    // The agent form names the tenant's default now, and offers the installation's backends.
    await nav("Agents");
    await page.waitForURL(/\/agents$/);
    const isolation = page.getByRole("form", { name: "Create agent" }).getByLabel("Isolation");
    await vi.waitFor(async () =>
      expect(await isolation.locator("option").first().textContent()).toBe(
        "Tenant default (one workspace per session)",
      ),
    );
    const backend = page.getByRole("form", { name: "Create agent" }).getByLabel("Backend");
    expect(await backend.locator("option").allTextContents()).toEqual([
      "Tenant default (local)",
      expect.stringMatching(/^local — host folders; every command and MCP server confined by bubblewrap/),
    ]);
    expect(pageErrors).toEqual([]);
  });

  it("shows admins each quota against the tenant's use, its own overrides marked, and the month's budget", async () => {
    await setTenantQuotaOverrides(
      cliOperatorActor(),
      { tenantId: tenant.scope.tenantId, overrides: { liveWorkspaces: 7 } },
      processBerth().quota,
      processBerth().db,
    );
    await changeBudget(
      tenant.scope,
      { monthlyBudgetUnits: 40, alertPercents: [80], hardStop: true, stopWorkspaces: false },
      processBerth().quota,
      processBerth().audit,
      processBerth().db,
    );
    await nav("Settings");
    await page.waitForURL(/\/settings$/);
    await page.reload(); // the previous visit's answer is still fresh for the query cache
    const card = page.getByTestId("settings-quotas");
    const liveRow = card.getByTestId("quota-liveWorkspaces");
    await vi.waitFor(async () => expect(await liveRow.textContent()).toMatch(/\d+ of 7$/));
    expect(await liveRow.textContent()).toMatch(/^live workspaces\s*tenant/);
    expect(await card.getByTestId("quota-concurrentTurns").textContent()).toMatch(/0 of 50$/);
    expect(await card.getByTestId("quota-workspaceCpus").textContent()).toContain("backend's setting");
    const budget = await card.getByTestId("quota-budget").textContent();
    expect(budget).toContain("of 40 units; new turns and provisions stop when it is used up");
    await shot(page, "settings-quotas");
    expect(pageErrors).toEqual([]);
  });
});
