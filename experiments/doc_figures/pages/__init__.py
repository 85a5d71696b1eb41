"""The page families: each module registers the generated blocks and facts of its own pages with `..registry`, and
imports no module of another family (a family of two or three modules shares helpers within itself). A new page's
results: a module here, named in its family (or a new one) of `FAMILIES`."""

from . import (
    architecture,
    clients,
    development,
    fine_tuning,
    inference,
    readme,
    reproduction,
    reproduction_authors,
    reproduction_depth,
    speed,
    speed_bf16,
    training,
)

#: each page family's modules
FAMILIES = {
    "speed": (speed, speed_bf16, inference),
    "reproduction": (reproduction, reproduction_authors, reproduction_depth),
    "training and fine-tuning": (training, fine_tuning),
    "architecture and config": (architecture,),
    "clients": (clients,),
    "README": (readme,),
    "development": (development,),
}
