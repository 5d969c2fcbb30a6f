PIP_NO_INDEX=1 PIP_FIND_LINKS=/work/main/.whl make repro-5090-linear OUT=/tmp/o/make
