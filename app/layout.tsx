import type { Metadata } from "next";
import type { ReactNode } from "react";
import { TRPCReactProvider } from "@/app/_trpc/client";
import "./globals.css";

// Rendered per request: every page carries the CSP nonce proxy.ts minted for it (static HTML could not).
export const dynamic = "force-dynamic";

export const metadata: Metadata = {
  title: { default: "Berth", template: "%s · Berth" },
  description: "Isolated, persistent workspaces for AI agents",
};

export default function RootLayout({ children }: { children: ReactNode }) {
  return (
    <html lang="en">
      <body>
        <TRPCReactProvider>{children}</TRPCReactProvider>
      </body>
    </html>
  );
}
