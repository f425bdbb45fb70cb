import { vi } from "vitest";

// `vi.waitFor` gives up after 1 s unless told otherwise. A page in Chromium against the real server may take
// longer than that to show a change when the machine is busy (npm test runs its streams side by side), so
// the browser tests wait up to 15 s by default; a test that names its own timeout keeps it.
const waitFor = vi.waitFor.bind(vi);
vi.waitFor = (callback, options) =>
  waitFor(callback, typeof options === "number" ? options : { timeout: 15_000, interval: 50, ...options });
