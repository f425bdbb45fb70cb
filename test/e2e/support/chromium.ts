import { existsSync } from "node:fs";
import { chromium, type Browser, type Download, type Page } from "playwright-core";
import { describe, expect, it } from "vitest";

/**
 * Debian's Chromium (never a browser download), as its headless shell (`chromium-headless-shell`, the
 * same Blink and V8 of the same package version without the desktop browser around them: what Playwright
 * itself runs headless). The full browser in headless mode took 45 % more CPU for the same tests (a GPU
 * process compositing frames nobody sees), and the e2e files were a quarter of the suite's CPU.
 */
export const CHROMIUM_PATH = "/usr/bin/chromium-headless-shell";
// stack-compat P13: no sandbox (root in a container), no GPU, and nothing that phones home.
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];
const IS_CI = process.env.CI === "1" || process.env.CI === "true";

/** Whether the browser tests can run here. */
export const HAS_CHROMIUM = existsSync(CHROMIUM_PATH);

/**
 * Call at the top of an e2e file: a missing browser FAILS under CI=1 (CI must install it) and is skipped
 * with the reason printed elsewhere; the file's suites then use `describe.skipIf(!HAS_CHROMIUM)`.
 */
export function requireChromium(): void {
  if (HAS_CHROMIUM) return;
  if (IS_CI) {
    describe("e2e prerequisites", () => {
      it(`has Chromium at ${CHROMIUM_PATH}`, () => {
        expect.fail(
          `${CHROMIUM_PATH} is missing; CI must install it (apt-get install -y chromium-headless-shell)`,
        );
      });
    });
  } else {
    console.warn(
      `[e2e] SKIPPED: ${CHROMIUM_PATH} not found. Install it with: apt-get install -y chromium-headless-shell`,
    );
  }
}

/**
 * Chromium, whose every new context waits up to 60 s for a navigation or an element instead of Playwright's
 * 30 s: npm test runs its streams side by side, and a busy 2-core machine can take longer than 30 s to serve a
 * page right after a sign-in. A wait that names its own timeout keeps it.
 */
export async function launchChromium(): Promise<Browser> {
  return withE2eDefaults(await chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS }));
}

/**
 * A connection to the Chromium the e2e files share (test/setup/e2e-shared.ts), with the same defaults.
 * Its close() closes this connection's contexts and disconnects; the browser keeps running for the others.
 */
export async function connectChromium(wsEndpoint: string): Promise<Browser> {
  return withE2eDefaults(await chromium.connect(wsEndpoint));
}

function withE2eDefaults(browser: Browser): Browser {
  const pages = new Set<Page>();
  const newContext = browser.newContext.bind(browser);
  // Reduced motion (app/globals.css): spinners and pulsing badges do not repaint the page without end.
  browser.newContext = async (options) => {
    const context = await newContext({ reducedMotion: "reduce", ...options });
    context.setDefaultTimeout(60_000);
    context.on("page", (page) => {
      pages.add(page);
      openPages.add(page);
      page.on("close", () => openPages.delete(page));
    });
    return context;
  };
  // A disconnected connection's pages are gone even if no page saw its own close.
  browser.on("disconnected", () => {
    for (const page of pages) openPages.delete(page);
  });
  return browser;
}

const openPages = new Set<Page>();

/**
 * What every page still open shows: its address and the start of its text. A failing test prints it, since
 * a timeout names only the element that never came, not the error or the other page shown instead.
 */
export async function openPagesOutput(): Promise<string[]> {
  const TEXT_LIMIT = 2_000;
  return Promise.all(
    [...openPages].map(async (page) => {
      const text = await Promise.race([
        page
          .evaluate(() => document.body?.innerText ?? "")
          .catch((error: Error) => `(unreadable: ${error.message})`),
        new Promise<string>((resolve) =>
          setTimeout(() => resolve("(the page did not answer in 5 s)"), 5_000),
        ),
      ]);
      return `--- page ${page.url()} ---\n${text.slice(0, TEXT_LIMIT)}`;
    }),
  );
}

/**
 * A finished download's content. Not `download.path()`: a browser reached through `connectChromium` keeps
 * its downloads on its own side, and Playwright streams them to the test instead of naming a local file.
 */
export async function downloadedText(download: Download): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of await download.createReadStream()) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
