/**
 * End to end, as a user meets Berth: `npm start`'s entry (scripts/start.ts, which builds Next when
 * the sources changed) against the test Postgres/Redis, then a real Chromium signs in and reads the
 * dashboard; a typed Node client calls the same server with an API key. Needs /usr/bin/chromium: a missing browser FAILS under CI=1 and skips (with the
 * reason printed) elsewhere.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createAuth } from "@/server/auth/auth";
import { createBerthClient } from "@/server/client/create-berth-client";
import { getDb } from "@/server/db";
import { apiKeySecret, createApiKey } from "@/server/modules/api-key/api-key.service";
import type { BerthServer } from "./support/berth-server";
import { HAS_CHROMIUM, requireChromium } from "./support/chromium";
import { type E2eApp, startE2eApp, submitSignIn, watchedPage } from "./support/e2e-app";
import { holdAppChunks, hydratedByReact, waitUntilHydratedByReact } from "./support/late-chunks";
import type { SeededTenant } from "./support/seed";
import { processBerth } from "@/server/composition/process-berth";

requireChromium();

describe.skipIf(!HAS_CHROMIUM)("dashboard, end to end", () => {
  let e2e: E2eApp;
  let app: BerthServer;
  let browser: Browser;
  let tenant: SeededTenant;

  beforeAll(async () => {
    e2e = await startE2eApp();
    ({ app, browser, tenant } = e2e);
  });

  afterAll(async () => {
    await e2e?.close();
  });

  async function newPage(): Promise<{ page: Page; pageErrors: string[] }> {
    return watchedPage(await browser.newContext());
  }

  it("shows a clear message for a wrong password and stays on the sign-in page", async () => {
    const { page, pageErrors } = await newPage();
    await page.goto(`${app.url}/sign-in`);
    await submitSignIn(page, tenant.email, "definitely-not-the-password");
    // Scoped to the form: Next also renders an (empty) role="alert" route announcer.
    const alert = page.getByRole("form", { name: "Sign in" }).getByRole("alert");
    await alert.waitFor();
    expect(await alert.textContent()).toBe("Invalid email or password.");
    expect(new URL(page.url()).pathname).toBe("/sign-in");
    expect(pageErrors).toEqual([]);
    await page.context().close();
  });

  it("keeps the sign-in form from submitting itself before React has hydrated it", async () => {
    // Before hydration a submit button has no handler, and the browser would send the form natively: a GET
    // to /sign-in whose query string holds the password (CI's e2e runs met it as a sign-in that never led
    // anywhere). Held here until the form has been tried by Enter and by a click.
    const context = await browser.newContext();
    const { page, pageErrors } = await watchedPage(context);
    const documents: string[] = [];
    page.on("request", (request) => {
      if (request.isNavigationRequest()) documents.push(request.url());
    });
    const late = await holdAppChunks(context, /^\/sign-in$/);
    await page.goto(`${app.url}/sign-in`, { waitUntil: "commit" });
    await late.decide(page);
    const button = page.getByRole("button", { name: "Sign in" });
    expect(await button.isDisabled()).toBe(true);
    await page.getByLabel("Email").fill(tenant.email);
    await page.getByLabel("Password").fill(tenant.password);
    await page.getByLabel("Password").press("Enter");
    await button.click({ force: true });
    late.release();
    await waitUntilHydratedByReact(page, 'form[aria-label="Sign in"] button');
    await button.click();
    await page.waitForURL(new RegExp(`/t/${tenant.slug}$`));
    // The one load of /sign-in, never a native submission to it.
    expect(documents.filter((url) => new URL(url).pathname === "/sign-in")).toEqual([`${app.url}/sign-in`]);
    expect(pageErrors).toEqual([]);
    await context.close();
  });

  it("signs the seeded admin in and shows overview counts that match the database", async () => {
    const { page, pageErrors } = await newPage();
    await page.goto(app.url);
    await page.waitForURL(/\/sign-in/);
    await submitSignIn(page, tenant.email, tenant.password);
    await page.waitForURL(new RegExp(`/t/${tenant.slug}$`));

    const counts = await tenant.counts();
    expect(counts).toMatchObject({ agents: 2, sessions: 3, workspaces: 1 });
    for (const key of ["agents", "sessions", "workspaces", "members", "apiKeys"] as const) {
      const value = page.getByTestId(`count-${key}`).locator(".stat-value");
      await vi.waitFor(async () => expect(await value.textContent()).toBe(String(counts[key])), {
        timeout: 15_000,
      });
    }
    expect(await page.getByTestId("tenant-name").textContent()).toBe(tenant.name);

    // The navigation leads to the sections, which list what the overview counted.
    await page.getByRole("navigation", { name: "Tenant" }).getByRole("link", { name: "Agents" }).click();
    await page.waitForURL(new RegExp(`/t/${tenant.slug}/agents$`));
    await page.getByRole("link", { name: "researcher" }).waitFor();
    await page.getByRole("link", { name: "coder" }).waitFor();
    expect(
      await page
        .getByRole("navigation", { name: "Tenant" })
        .getByRole("link", { name: "Agents" })
        .getAttribute("aria-current"),
    ).toBe("page");
    expect(pageErrors).toEqual([]);
    await page.context().close();
  });

  it("hydrates the overview after sign-in while the app's own chunks are still on their way", async () => {
    // Issue 12's React #418: after sign-in the framework's scripts are cached, so hydration starts while
    // the layout's client chunks still load. Anything in <head> that needs one of them (the theme script
    // once came from a "use client" module, as a client reference) makes React wait inside <head>, and
    // its replay of <head> then hydrates <body> from the wrong node. Held here until <head> is hydrated.
    const context = await browser.newContext();
    const { page, pageErrors } = await watchedPage(context);
    await page.goto(`${app.url}/sign-in`);
    const late = await holdAppChunks(context, new RegExp(`^/t/${tenant.slug}$`));
    await submitSignIn(page, tenant.email, tenant.password);
    await page.waitForURL(new RegExp(`/t/${tenant.slug}$`), { waitUntil: "commit" });
    await late.decide(page);
    await waitUntilHydratedByReact(page, "head > script:not([src])").catch(() => {
      throw new Error("React never hydrated <head> without the app's chunks: <head> waits on a client chunk");
    });
    expect(late.held().length).toBeGreaterThan(0);
    const serverRendered = await page.$('[data-testid="tenant-name"]');
    expect(await hydratedByReact(page, '[data-testid="tenant-name"]')).toBe(false);
    // The overview's charts fetch once React has committed, after hydration or after a failed one.
    const committed = page.waitForRequest(/\/api\/trpc\//);
    late.release();
    await committed;
    expect(await hydratedByReact(page, '[data-testid="tenant-name"]')).toBe(true);
    // Hydrated in place: after a mismatch React throws the server's DOM away and renders its own.
    expect(await serverRendered?.evaluate((node) => node.isConnected)).toBe(true);
    expect(pageErrors).toEqual([]);
    await context.close();
  });

  it("creates an API key in the dashboard, shows it once, and revokes it", async () => {
    const { page, pageErrors } = await newPage();
    await page.goto(`${app.url}/t/${tenant.slug}/api-keys`);
    await page.waitForURL(/\/sign-in/);
    await submitSignIn(page, tenant.email, tenant.password);
    await page.waitForURL(new RegExp(`/t/${tenant.slug}$`));
    await page.getByRole("navigation", { name: "Tenant" }).getByRole("link", { name: "API keys" }).click();
    await page.waitForURL(new RegExp(`/t/${tenant.slug}/api-keys$`));

    const form = page.getByRole("form", { name: "Create API key" });
    await form.getByLabel("Name").fill("from-the-browser");
    await form.getByLabel("Role").selectOption("viewer");
    await form.getByRole("button", { name: "Create key" }).click();
    const plainKey = (await page.getByTestId("created-key-value").textContent()) ?? "";
    expect(plainKey).toMatch(/^berth_/);

    const client = createBerthClient({ url: app.url, apiKey: plainKey });
    expect((await client.tenant.overview.query({})).role).toBe("viewer");

    const row = page.getByTestId("api-key-row").filter({ hasText: "from-the-browser" });
    await row.getByRole("button", { name: "Revoke" }).click();
    await page.getByTestId("confirm-dialog").getByRole("button", { name: "Revoke key" }).click();
    await row.getByText("revoked").waitFor();
    // The secret leaves the page with the key, without a reload.
    expect(await page.content()).not.toContain(plainKey);
    const error = await client.tenant.overview.query({}).then(
      () => null,
      (e: unknown) => e as { data?: { code?: string } },
    );
    expect(error?.data?.code).toBe("UNAUTHORIZED");
    // Shown once: a reload lists the key without its secret.
    await page.reload();
    await page.getByTestId("api-key-row").first().waitFor();
    expect(await page.content()).not.toContain(plainKey);
    expect(pageErrors).toEqual([]);
    await page.context().close();
  });

  it("answers a typed Node client with an API key over the real server", async () => {
    const auth = createAuth({
      secret: process.env.BERTH_AUTH_SECRET!,
      baseUrl: app.url,
      prisma: getDb(),
      log: () => {},
    });
    const { plainKey } = await createApiKey(
      auth,
      tenant.scope,
      { name: "e2e client", role: "viewer" },
      apiKeySecret(processBerth().config),
      processBerth().db,
    );
    const client = createBerthClient({ url: app.url, apiKey: plainKey });
    const overview = await client.tenant.overview.query({});
    expect(overview.tenant.slug).toBe(tenant.slug);
    expect(overview.counts).toEqual(await tenant.counts());

    const response = await fetch(`${app.url}/api/trpc/tenant.me`, {
      headers: { "x-request-id": "e2e-trace-7" },
    });
    expect(response.status).toBe(401);
    expect(response.headers.get("x-request-id")).toBe("e2e-trace-7");
  });
});
