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
import { useState } from "react";
import { Brand } from "@/app/_components/brand";
import { Button } from "@/app/_components/ui/button";
import { Dialog, DialogContent, DialogTitle, DialogTrigger } from "@/app/_components/ui/dialog";
import { SideNav, type SideNavItem } from "@/app/_components/ui/side-nav";

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
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const items = SECTIONS.map(({ segment, label, icon }): SideNavItem => {
    const href = segment ? `${base}/${segment}` : base;
    return {
      href,
      label,
      icon,
      isCurrent: (pathname) => (segment ? pathname.startsWith(href) : pathname === base),
    };
  });
  return <SideNav label="Tenant" items={items} onNavigate={onNavigate} />;
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
