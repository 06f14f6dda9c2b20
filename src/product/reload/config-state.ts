import { configHash, redactedConfig, type Config, type ConfigView, type LastReload } from '../../shared/config';

/** The config this process serves under, as a reload leaves it. */
export class ConfigState {
  private hashInForce: string;
  private last: LastReload | null = null;

  constructor(private inForce: Config) {
    this.hashInForce = configHash(inForce);
  }

  get config(): Config {
    return this.inForce;
  }

  get hash(): string {
    return this.hashInForce;
  }

  /** A reload was attempted: on success `config` is the one now in force. */
  record(last: LastReload | null, config?: Config): void {
    this.last = last ?? this.last;
    if (!config) return;
    this.inForce = config;
    this.hashInForce = configHash(config);
  }

  view(): ConfigView {
    return { hash: this.hashInForce, lastReload: this.last, config: redactedConfig(this.inForce) };
  }
}
