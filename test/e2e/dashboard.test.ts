/**
 * End to end, as a user meets Berth: `npm start`'s entry (scripts/start.ts, which builds Next when
 * the sources changed) against the test Postgres/Redis, then a real Chromium signs in and reads the
 * dashboard; a typed Node client calls the same server with an API key. Needs /usr/bin/chromium: a missing browser FAILS under CI=1 and skips (with the
 * reason printed) elsewhere.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createAuth } from "@/server/auth/auth";
import { createBerthClient } from "@/server/client/create-berth-client";
import { disconnectDb, getDb } from "@/server/db";
import { createApiKey } from "@/server/modules/api-key/api-key.service";
import { findFreePort } from "@/scripts/services/ports";
import { type RunningBerth, startBerth } from "./support/berth-server";
import { HAS_CHROMIUM, launchChromium, requireChromium } from "./support/chromium";
import { type SeededTenant, seedTenantWithData } from "./support/seed";

requireChromium();

describe.skipIf(!HAS_CHROMIUM)("dashboard, end to end", () => {
  let app: RunningBerth;
  let browser: Browser;
  let tenant: SeededTenant;
  let dataDir: string | undefined;

  beforeAll(async () => {
    const port = await findFreePort();
    // The seed and the server share the test database (DATABASE_URL from the global setup) and the
    // auth secret; the base URL must be the one the browser uses (better-auth checks the Origin).
    dataDir = await mkdtemp(path.join(tmpdir(), "berth-e2e-"));
    const env = { ...process.env, BERTH_DATA_DIR: dataDir, LOG_LEVEL: "warn" };
    tenant = await seedTenantWithData({
      authSecret: process.env.BERTH_AUTH_SECRET!,
      baseUrl: `http://127.0.0.1:${port}`,
    });
    app = await startBerth(port, env);
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    await disconnectDb();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  /** A fresh browser context; uncaught page errors (hydration mismatches included) fail the test. */
  async function newPage(): Promise<{ page: Page; pageErrors: string[] }> {
    const context = await browser.newContext();
    const page = await context.newPage();
    const pageErrors: string[] = [];
    page.on("pageerror", (error) => pageErrors.push(error.message));
    return { page, pageErrors };
  }

  async function signIn(page: Page, email: string, password: string) {
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Sign in" }).click();
  }

  it("shows a clear message for a wrong password and stays on the sign-in page", async () => {
    const { page, pageErrors } = await newPage();
    await page.goto(`${app.url}/sign-in`);
    await signIn(page, tenant.email, "definitely-not-the-password");
    // Scoped to the form: Next also renders an (empty) role="alert" route announcer.
    const alert = page.getByRole("form", { name: "Sign in" }).getByRole("alert");
    await alert.waitFor();
    expect(await alert.textContent()).toBe("Invalid email or password.");
    expect(new URL(page.url()).pathname).toBe("/sign-in");
    expect(pageErrors).toEqual([]);
    await page.context().close();
  });

  it("signs the seeded admin in and shows overview counts that match the database", async () => {
    const { page, pageErrors } = await newPage();
    await page.goto(app.url);
    await page.waitForURL(/\/sign-in/);
    await signIn(page, tenant.email, tenant.password);
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
    await page.getByRole("link", { name: "Agents" }).click();
    await page.waitForURL(new RegExp(`/t/${tenant.slug}/agents$`));
    await page.getByRole("link", { name: "researcher" }).waitFor();
    await page.getByRole("link", { name: "coder" }).waitFor();
    expect(await page.getByRole("link", { name: "Agents" }).getAttribute("aria-current")).toBe("page");
    expect(pageErrors).toEqual([]);
    await page.context().close();
  });

  it("creates an API key in the dashboard, shows it once, and revokes it", async () => {
    const { page, pageErrors } = await newPage();
    await page.goto(`${app.url}/t/${tenant.slug}/api-keys`);
    await page.waitForURL(/\/sign-in/);
    await signIn(page, tenant.email, tenant.password);
    await page.waitForURL(new RegExp(`/t/${tenant.slug}$`));
    await page.getByRole("link", { name: "API keys" }).click();
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
    await row.getByText("revoked").waitFor();
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
    const { plainKey } = await createApiKey(auth, tenant.scope, { name: "e2e client", role: "viewer" });
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
