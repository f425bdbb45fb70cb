import type { Metadata, Viewport } from "next";
import { headers } from "next/headers";
import type { ReactNode } from "react";
import { TRPCReactProvider } from "@/app/_trpc/client";
import { ThemeProvider } from "@/app/_components/ui/theme";
import { THEME_BOOT_SCRIPT } from "@/app/_components/ui/theme-boot";
import { Toaster } from "@/app/_components/ui/toaster";
import { TooltipProvider } from "@/app/_components/ui/tooltip";
import "./globals.css";

// Rendered per request: every page carries the CSP nonce proxy.ts minted for it (static HTML could not).
export const dynamic = "force-dynamic";

export const metadata: Metadata = {
  title: { default: "Berth", template: "%s · Berth" },
  description: "Isolated, persistent workspaces for AI agents",
};

export const viewport: Viewport = { width: "device-width", initialScale: 1 };

/** The nonce proxy.ts put in this request's CSP: an inline script without it is blocked by the policy. */
async function requestNonce(): Promise<string | undefined> {
  const policy = (await headers()).get("content-security-policy") ?? "";
  return /'nonce-([^']+)'/.exec(policy)?.[1];
}

export default async function RootLayout({ children }: { children: ReactNode }) {
  const nonce = await requestNonce();
  return (
    // The boot script sets the `dark` class before React hydrates, hence the warning suppression on <html>.
    <html lang="en" suppressHydrationWarning>
      <head>
        {/* A string from a server module, never a client reference: see theme-boot.ts (React #418). */}
        <script nonce={nonce} dangerouslySetInnerHTML={{ __html: THEME_BOOT_SCRIPT }} />
      </head>
      <body>
        <ThemeProvider>
          <TooltipProvider delayDuration={300}>
            <TRPCReactProvider>{children}</TRPCReactProvider>
            <Toaster />
          </TooltipProvider>
        </ThemeProvider>
      </body>
    </html>
  );
}
