import type { BrowserContext, Page, Route } from "playwright-core";

/**
 * Makes the app's own client chunks arrive late for the document whose address matches `documentPath`, as
 * they do after sign-in on a loaded machine (issue 12's React #418). Every chunk that document asks for
 * waits until `decide(page)` has read the page's RSC payload: Next's shared framework chunks, which every
 * client component needs and hydration cannot start without, then go through; every other chunk stays
 * held until `release()`. Hydration starts and gets as far as it can without the app's modules, and
 * whatever needs one of them waits, deterministically.
 */
export async function holdAppChunks(context: BrowserContext, documentPath: RegExp) {
  let appChunks: Set<string> | undefined;
  const waiting: { route: Route; pathname: string }[] = [];
  let released = false;
  const pass = () => {
    for (const entry of waiting.splice(0)) {
      if (released || !appChunks!.has(entry.pathname)) void entry.route.continue();
      else waiting.push(entry);
    }
  };
  // The Referer names the document that asked (same origin: the whole URL), so other pages pass.
  await context.route(/\/_next\/static\/chunks\/[^/?]+\.js(\?.*)?$/, async (route) => {
    const referer = (await route.request().headerValue("referer")) ?? "";
    if (released || !documentPath.test(new URL(referer || "about:blank").pathname)) return route.continue();
    waiting.push({ route, pathname: new URL(route.request().url()).pathname });
    if (appChunks) pass();
  });
  return {
    /** Once the document is parsed: lets the framework chunks through. */
    decide: async (page: Page) => {
      await page.waitForFunction(() => document.readyState !== "loading");
      const scripts = await page.evaluate(() => [...document.scripts].map((script) => script.text));
      appChunks = appOnlyChunks(scripts.join("\n"));
      pass();
    },
    held: () => waiting.map((entry) => entry.pathname),
    release: () => {
      released = true;
      pass();
    },
  };
}

/**
 * The chunks some client component of the page needs beyond the set every one of them needs (Next's
 * framework). Read from the page's inline RSC payload: `self.__next_f.push([1,"<rows>"])` scripts whose
 * rows are `<id>:"/_next/static/chunks/….js"` (a chunk's path) and `<id>:I[<module>,["$<id>",…],…]`
 * (a client reference and the chunks it loads).
 */
function appOnlyChunks(html: string): Set<string> {
  const rows = [...html.matchAll(/self\.__next_f\.push\(\[1,("(?:[^"\\]|\\.)*")\]\)/g)]
    .map((match) => JSON.parse(match[1]!) as string)
    .join("");
  const paths = new Map<string, string>();
  for (const [, id, path] of rows.matchAll(/(?:^|\n)([0-9a-f]+):"(\/_next\/static\/chunks\/[^"]+\.js)"/g))
    paths.set(id!, path!);
  const references = [...rows.matchAll(/(?:^|\n)[0-9a-f]+:I\[\d+,\[([^\]]*)\]/g)].map(
    ([, list]) => new Set([...list!.matchAll(/"\$([0-9a-f]+)"/g)].map(([, id]) => paths.get(id!) ?? id!)),
  );
  if (references.length === 0) throw new Error("no client references in the page's RSC payload");
  const shared = references.reduce((all, chunks) => new Set([...all].filter((chunk) => chunks.has(chunk))));
  return new Set(references.flatMap((chunks) => [...chunks].filter((chunk) => !shared.has(chunk))));
}

/**
 * Whether React has claimed the element during hydration: it keeps its fiber on a `__reactFiber$<random>`
 * property of each DOM node it hydrates (render phase, so it shows while the rest of the tree still
 * waits). An element the server rendered but React has not reached has none.
 */
function claimedByReact(css: string): boolean {
  const node = document.querySelector(css);
  return !!node && Object.keys(node).some((key) => key.startsWith("__reactFiber$"));
}

export function hydratedByReact(page: Page, selector: string): Promise<boolean> {
  return page.evaluate(claimedByReact, selector);
}

export async function waitUntilHydratedByReact(page: Page, selector: string): Promise<void> {
  await page.waitForFunction(claimedByReact, selector);
}
