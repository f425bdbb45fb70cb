import { describe, expect, it } from "vitest";
import { parseTrustedProxies, resolveClientAddress } from "@/server/api/client-address";
import { crossOriginRefusal } from "@/server/api/request-origin";

const policy = { allowedOrigins: ["http://localhost:3000", "http://127.0.0.1:3000"] };
const req = (method: string, headers: Record<string, string>) => ({ method, headers: new Headers(headers) });

describe("crossOriginRefusal (CSRF)", () => {
  it("refuses cookie POSTs from another site by Fetch Metadata or Origin", () => {
    expect(
      crossOriginRefusal(req("POST", { "sec-fetch-site": "cross-site", cookie: "c=1" }), policy),
    ).toMatch(/cross-site/);
    expect(crossOriginRefusal(req("POST", { "sec-fetch-site": "same-site" }), policy)).toMatch(/same-site/);
    expect(crossOriginRefusal(req("POST", { origin: "https://evil.example" }), policy)).toMatch(/evil/);
    expect(crossOriginRefusal(req("PUT", { origin: "null" }), policy)).toMatch(/null/);
  });

  it("lets same-origin browsers, Bearer callers, safe methods and non-browser clients through", () => {
    expect(crossOriginRefusal(req("POST", { "sec-fetch-site": "same-origin" }), policy)).toBeNull();
    expect(crossOriginRefusal(req("POST", { origin: "http://127.0.0.1:3000" }), policy)).toBeNull();
    expect(
      crossOriginRefusal(
        req("POST", { "sec-fetch-site": "cross-site", authorization: "Bearer berth_x" }),
        policy,
      ),
    ).toBeNull();
    expect(crossOriginRefusal(req("GET", { "sec-fetch-site": "cross-site" }), policy)).toBeNull();
    expect(crossOriginRefusal(req("POST", {}), policy)).toBeNull();
  });
});

describe("resolveClientAddress (trusted proxies)", () => {
  const none = parseTrustedProxies([]);
  const proxies = parseTrustedProxies(["10.0.0.5", "172.16.0.0/12"]);

  it("ignores X-Forwarded-For unless the peer is a trusted proxy", () => {
    expect(resolveClientAddress("203.0.113.9", "1.2.3.4", none)).toBe("203.0.113.9");
    expect(resolveClientAddress("::ffff:127.0.0.1", "1.2.3.4", none)).toBe("127.0.0.1");
    expect(resolveClientAddress("203.0.113.9", "1.2.3.4", proxies)).toBe("203.0.113.9");
  });

  it("walks the chain from the right past trusted hops; prepended values cannot win", () => {
    expect(resolveClientAddress("10.0.0.5", "1.2.3.4", proxies)).toBe("1.2.3.4");
    expect(resolveClientAddress("10.0.0.5", "6.6.6.6, 1.2.3.4, 172.16.1.1", proxies)).toBe("1.2.3.4");
    expect(resolveClientAddress("10.0.0.5", "garbage, 1.2.3.4", proxies)).toBe("1.2.3.4");
    expect(resolveClientAddress("10.0.0.5", "1.2.3.4, not-an-ip", proxies)).toBe("10.0.0.5");
    expect(resolveClientAddress("10.0.0.5", undefined, proxies)).toBe("10.0.0.5");
  });
});
