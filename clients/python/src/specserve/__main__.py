import sys

from specserve.cli import main

sys.exit(main())
