import type { ReactNode } from "react";
import { Brand } from "./brand";

/** The centred card of the pages outside a tenant (sign-in, accepting an invitation, no tenant yet). */
export function AuthCard({
  title,
  description,
  children,
}: {
  title: string;
  description?: ReactNode;
  children?: ReactNode;
}) {
  return (
    <main className="flex min-h-screen flex-col items-center justify-center bg-[radial-gradient(ellipse_at_top,var(--color-muted),transparent_60%)] px-4 py-12">
      <div className="w-full max-w-sm">
        <Brand className="mb-8 justify-center text-lg" />
        <div className="bg-card rounded-xl border p-6 shadow-sm sm:p-8">
          <h1 className="text-xl">{title}</h1>
          {description && <p className="text-muted-foreground mt-1.5 mb-6 text-sm">{description}</p>}
          {children}
        </div>
      </div>
    </main>
  );
}
