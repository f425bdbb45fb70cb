import { mkdirSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import type { Page } from "playwright-core";

/** Where the e2e screenshots go; CI prints the listing (and keeps the folder as an artifact). */
export const SCREENSHOT_DIR = path.resolve("test-results", "screenshots");

/**
 * Saves a full-page screenshot as `<suite>-<nn>-<name>.png`, numbered in the order taken, so the folder
 * reads as the story of each workflow. Returns the file's path.
 */
export function screenshotter(suite: string) {
  let count = 0;
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  return async (page: Page, name: string): Promise<string> => {
    count += 1;
    const file = path.join(SCREENSHOT_DIR, `${suite}-${String(count).padStart(2, "0")}-${name}.png`);
    await page.screenshot({ path: file, fullPage: true });
    return file;
  };
}

/** The folder's listing (name and size), printed at the end of a suite. */
export function printScreenshotListing(suite: string): void {
  const files = readdirSync(SCREENSHOT_DIR)
    .filter((file) => file.startsWith(`${suite}-`))
    .sort();
  const lines = files.map(
    (file) => `  ${file}  ${Math.round(statSync(path.join(SCREENSHOT_DIR, file)).size / 1024)} KiB`,
  );
  console.log(`screenshots (${SCREENSHOT_DIR}), ${suite}:\n${lines.join("\n")}`);
}
