"use client";

import {
  Activity,
  BookMarked,
  Bot,
  Gauge,
  KeyRound,
  LayoutDashboard,
  Menu,
  MessagesSquare,
  ScrollText,
  Server,
  Settings,
  Users,
  Webhook,
} from "lucide-react";
import Link from "next/link";
import { usePathname } from "next/navigation";
import { useState } from "react";
import { Brand } from "@/app/_components/brand";
import { Button } from "@/app/_components/ui/button";
import { cn } from "@/app/_components/ui/cn";
import { Dialog, DialogContent, DialogTitle, DialogTrigger } from "@/app/_components/ui/dialog";

const SECTIONS = [
  { segment: "", label: "Overview", icon: LayoutDashboard },
  { segment: "agents", label: "Agents", icon: Bot },
  { segment: "sessions", label: "Sessions", icon: MessagesSquare },
  { segment: "workspaces", label: "Workspaces", icon: Server },
  { segment: "library", label: "Library", icon: BookMarked },
  { segment: "jobs", label: "Jobs", icon: Activity },
  { segment: "readiness", label: "Readiness", icon: Gauge },
  { segment: "webhooks", label: "Webhooks", icon: Webhook },
  { segment: "audit", label: "Audit", icon: ScrollText },
  { segment: "api-keys", label: "API keys", icon: KeyRound },
  { segment: "members", label: "Members", icon: Users },
  { segment: "settings", label: "Settings", icon: Settings },
] as const;

export function TenantNav({ tenantSlug, onNavigate }: { tenantSlug: string; onNavigate?: () => void }) {
  const pathname = usePathname();
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  return (
    <nav className="flex flex-col gap-0.5" aria-label="Tenant">
      {SECTIONS.map(({ segment, label, icon: Icon }) => {
        const href = segment ? `${base}/${segment}` : base;
        const isCurrent = segment ? pathname.startsWith(href) : pathname === base;
        return (
          <Link
            key={label}
            href={href}
            onClick={onNavigate}
            aria-current={isCurrent ? "page" : undefined}
            className={cn(
              "text-muted-foreground hover:bg-accent hover:text-foreground flex h-8 items-center gap-2.5 rounded-md px-2.5 text-sm font-medium transition-colors",
              isCurrent && "bg-accent text-foreground",
            )}
          >
            <Icon className="size-4" aria-hidden />
            {label}
          </Link>
        );
      })}
    </nav>
  );
}

/** Below the `md` breakpoint the sidebar folds into a menu button that opens it as a sheet. */
export function MobileNav({ tenantSlug, tenantName }: { tenantSlug: string; tenantName: string }) {
  const [open, setOpen] = useState(false);
  return (
    <Dialog open={open} onOpenChange={setOpen}>
      <DialogTrigger asChild>
        <Button variant="ghost" size="icon" aria-label="Open navigation" className="md:hidden">
          <Menu />
        </Button>
      </DialogTrigger>
      <DialogContent className="top-0 left-0 h-full max-h-none w-72 max-w-[80vw] translate-x-0 translate-y-0 content-start rounded-none border-r p-4">
        <DialogTitle className="sr-only">Navigation</DialogTitle>
        <Brand />
        <p className="text-muted-foreground -mt-2 text-xs">{tenantName}</p>
        <TenantNav tenantSlug={tenantSlug} onNavigate={() => setOpen(false)} />
      </DialogContent>
    </Dialog>
  );
}
