"""What SGLang's /metrics answers: the multiprocess registry through generate_latest."""
import sys
from prometheus_client import CollectorRegistry, generate_latest, multiprocess
r = CollectorRegistry()
multiprocess.MultiProcessCollector(r)
sys.stdout.write(generate_latest(r).decode())
