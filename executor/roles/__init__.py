"""The PDD roles: P (`p.PrefillWorker`), RLD (`rld.RelayWorker`), MD (`md.MainWorker`; also D of PD baselines)."""
