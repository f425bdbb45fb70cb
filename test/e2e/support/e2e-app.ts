import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { disconnectDb } from "@/server/db";
import { findFreePort } from "@/scripts/services/ports";
import { type RunningBerth, startBerth } from "./berth-server";
import { launchChromium } from "./chromium";
import { type SeededTenant, seedTenantWithData } from "./seed";

export type E2eApp = {
  app: RunningBerth;
  browser: Browser;
  tenant: SeededTenant;
  /** The URL the browser uses (better-auth checks the Origin against it). */
  baseUrl: string;
  dataDir: string;
  /** Browser, server, database client and data directory, in that order; safe after a failed start. */
  close(): Promise<void>;
};

/**
 * A seeded tenant, Berth started as `npm start` runs it (its own data directory) and Chromium. The seed
 * and the server share the test database (DATABASE_URL from the global setup) and the auth secret.
 */
export async function startE2eApp(options: { env?: Record<string, string> } = {}): Promise<E2eApp> {
  const port = await findFreePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const dataDir = await mkdtemp(path.join(tmpdir(), "berth-e2e-"));
  let app: RunningBerth | undefined;
  let browser: Browser | undefined;
  const close = async () => {
    await browser?.close();
    await app?.stop();
    await disconnectDb();
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    const tenant = await seedTenantWithData({ authSecret: process.env.BERTH_AUTH_SECRET!, baseUrl });
    app = await startBerth(port, {
      ...process.env,
      BERTH_DATA_DIR: dataDir,
      LOG_LEVEL: "warn",
      // The confined local backend sees only the system and the workspace: the MCP servers the tests
      // declare come from npm, so let the sandbox read this checkout's node_modules (read-only).
      BERTH_SANDBOX_READONLY_PATHS: path.resolve("node_modules"),
      ...options.env,
    });
    browser = await launchChromium();
    return { app, browser, tenant, baseUrl, dataDir, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** A new page whose uncaught errors (hydration mismatches included) are collected for the test to check. */
export async function watchedPage(context: BrowserContext): Promise<{ page: Page; pageErrors: string[] }> {
  const page = await context.newPage();
  const pageErrors: string[] = [];
  // With the page's address: a hydration error names no component in a production build.
  page.on("pageerror", (error) => {
    pageErrors.push(`${page.url()}: ${error.message}`);
  });
  return { page, pageErrors };
}

/** Fills and submits the sign-in form on the current page. */
export async function submitSignIn(page: Page, email: string, password: string): Promise<void> {
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
}
