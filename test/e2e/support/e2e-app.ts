import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { findFreePort } from "@/scripts/services/ports";
import { type BerthServer, type RunningBerth, startBerth } from "./berth-server";
import { connectChromium, launchChromium } from "./chromium";
import { sharedApp } from "./shared-app";
import { type SeededTenant, seedTenantWithData } from "./seed";
import { closeProcessBerth } from "@/server/composition/process-berth";

export type E2eApp = {
  app: BerthServer;
  browser: Browser;
  tenant: SeededTenant;
  /** The URL the browser uses (better-auth checks the Origin against it). */
  baseUrl: string;
  dataDir: string;
  /**
   * Closes what this file opened: its browser (or its connection to the shared one), its own server and
   * data directory if any, the database client. Safe after a failed start.
   */
  close(): Promise<void>;
};

/**
 * A seeded tenant of its own, a Berth server as `npm start` runs it and Chromium. The seed and the server
 * share the test database (DATABASE_URL from the global setup) and the auth secret.
 *
 * Without `env`: the server and Chromium every e2e file shares (test/setup/e2e-shared.ts), reached through a
 * browser connection of this file's own; close() leaves both running. With `env` (settings the shared server
 * does not run with): a server of its own, with its own data directory, and a Chromium of its own.
 */
export async function startE2eApp(options: { env?: Record<string, string> } = {}): Promise<E2eApp> {
  if (!options.env) return connectToSharedApp();
  // Queues of its own: on the run's Redis prefix the shared server's workers, which run without this
  // env, took this server's jobs (a webhook delivery refused for want of its allow-list, a provision in
  // the other data directory). This file's own Redis use (its enqueues, the audit buffer) follows;
  // services-env.ts sets the run's prefix again for the next file, and services.ts deletes both.
  process.env.BERTH_REDIS_PREFIX = `${process.env.BERTH_REDIS_PREFIX}-own-${randomBytes(4).toString("hex")}`;
  const port = await findFreePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const dataDir = await mkdtemp(path.join(tmpdir(), "berth-e2e-"));
  let app: RunningBerth | undefined;
  let browser: Browser | undefined;
  const close = async () => {
    await browser?.close();
    await app?.stop();
    await closeProcessBerth();
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

async function connectToSharedApp(): Promise<E2eApp> {
  let browser: Browser | undefined;
  const close = async () => {
    await browser?.close();
    await closeProcessBerth();
  };
  try {
    const shared = await sharedApp();
    const tenant = await seedTenantWithData({
      authSecret: process.env.BERTH_AUTH_SECRET!,
      baseUrl: shared.url,
    });
    browser = await connectChromium(shared.wsEndpoint);
    return { app: { url: shared.url }, browser, tenant, baseUrl: shared.url, dataDir: shared.dataDir, close };
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
