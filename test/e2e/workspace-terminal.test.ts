/**
 * End to end for the dashboard terminal, as a tenant admin in Chromium on a workspace the workers
 * provisioned for real (the confined local backend): the Terminal tab connects (xterm.js over the terminal
 * WebSocket), a typed `echo` runs in the workspace, a smaller window resizes the terminal (the shell's
 * `stty size` follows), the lease is held while it is open and released when the page is left. Needs
 * /usr/bin/chromium: a missing browser FAILS under CI=1 and skips (with the reason printed) elsewhere.
 */
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getDb } from "@/server/db";
import { HAS_CHROMIUM, requireChromium } from "./support/chromium";
import { type E2eApp, startE2eApp } from "./support/e2e-app";
import { provisionLocalWorkspace } from "./support/local-workspace";
import { printScreenshotListing, screenshotter } from "./support/screenshots";
import { signedInPages } from "./support/signed-in";
import { closeProcessBerth } from "@/server/composition/process-berth";

requireChromium();

const shot = screenshotter("workspace-terminal");

describe.skipIf(!HAS_CHROMIUM)("the workspace terminal, end to end", () => {
  let e2e: E2eApp;
  let workspaceId: string;
  let open: ReturnType<typeof signedInPages>;

  beforeAll(async () => {
    e2e = await startE2eApp();
    open = signedInPages(e2e.app, e2e.browser, e2e.tenant.slug);
    workspaceId = await provisionLocalWorkspace(e2e.tenant, "term");
  });

  afterAll(async () => {
    printScreenshotListing("workspace-terminal");
    await closeProcessBerth();
    await e2e?.close();
  });

  const terminalLeases = () =>
    getDb().workspaceLease.count({ where: { workspaceId, holder: { startsWith: "terminal:" } } });
  const screen = (page: Page) => page.getByTestId("terminal").locator(".xterm-rows");
  /** Types a command line into the terminal (xterm's keyboard input, as a person types). */
  async function run(page: Page, line: string) {
    await page.getByTestId("terminal").click();
    await page.keyboard.type(line);
    await page.keyboard.press("Enter");
  }
  /** The last `rows cols` line `stty size` printed on the screen. */
  async function lastSize(page: Page, after: string): Promise<[number, number]> {
    let found: [number, number] | null = null;
    await expect
      .poll(
        async () => {
          const text = (await screen(page).innerText()).split(after).at(-1) ?? "";
          const match = /^\s*(\d+) (\d+)\s*$/m.exec(text);
          found = match ? [Number(match[1]), Number(match[2])] : null;
          return found !== null;
        },
        { timeout: 15_000 },
      )
      .toBe(true);
    return found!;
  }

  it("opens a shell, runs echo, follows a resize, and releases its lease when the page is left", async () => {
    const { page, pageErrors } = await open(`/workspaces/${workspaceId}`, e2e.tenant);
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.getByRole("tab", { name: "Terminal" }).click();
    await page.getByTestId("terminal-status").filter({ hasText: "Connected" }).waitFor();
    await expect.poll(terminalLeases, { timeout: 15_000 }).toBe(1);

    await run(page, "echo from-the-browser-$((6*7))");
    await screen(page).filter({ hasText: "from-the-browser-42" }).waitFor();
    await run(page, "echo mark-one; stty size");
    const [rows, cols] = await lastSize(page, "mark-one");
    expect(cols).toBeGreaterThan(40);
    await shot(page, "echo");

    // A narrower, shorter window: the fit add-on resizes xterm, which tells the server, whose PTY tells
    // the shell.
    await page.setViewportSize({ width: 800, height: 600 });
    await expect
      .poll(async () => {
        await run(page, "echo mark-two; stty size");
        const [, narrower] = await lastSize(page, "mark-two");
        return narrower < cols;
      })
      .toBe(true);
    const [rowsAfter, colsAfter] = await lastSize(page, "mark-two");
    expect(colsAfter).toBeLessThan(cols);
    expect(rowsAfter).toBeLessThanOrEqual(rows);
    await shot(page, "resized");

    // Leaving the tab says goodbye: the shell ends and the lease is released.
    await page.getByRole("tab", { name: "Events" }).click();
    await expect.poll(terminalLeases, { timeout: 15_000 }).toBe(0);
    expect(pageErrors).toEqual([]);
    await page.close();
  });
});
