"
timeoutÿÿÿÿÿÿÿÿÿ*
inputBYTES*B‰PNG